"""The garbage collector's settings while a run executes.

A run allocates a few dozen objects per unit (requests, rows, futures, tasks); with the
interpreter's default threshold a young-generation collection runs every 700 of them,
and each full collection walks every object in the process (SQLAlchemy, Jinja, the
workflow: hundreds of thousands). Measured on the chained bench (10,000 x 2, mock 0 ms):
0.43-0.79 s of 3.7-5.7 s CPU went to the collector, 0.26-0.37 s of it in six full
collections. While a run executes, what exists at its start is frozen (collections
skip it), young collections run every 50,000 allocations and full ones after 100 x 20
of those (about a million units' worth of allocations): measured on the latency bench (20,000
units at 50 ms), 160-230 ms of collector time with 10,000/10/10, 45-59 ms with these.

Reference counting still frees everything acyclic at once; only cyclic garbage waits a
little longer. Settings are restored when the last run in the process ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["run_gc_policy"]

_THRESHOLD = (50_000, 20, 100)
_lock = threading.Lock()
_active = 0
_saved: tuple[int, int, int] = gc.get_threshold()


@contextmanager
def run_gc_policy() -> Iterator[None]:
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(*(max(a, b) for a, b in zip(_saved, _THRESHOLD, strict=True)))
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                gc.set_threshold(*_saved)
                gc.unfreeze()
