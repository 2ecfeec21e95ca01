"""``--json``'s stdout holds one JSON document, whoever else writes to file descriptor 1.

A tool's ``print`` is routed to stderr in Python (:func:`agac.usercode.user_stdout`),
but a subprocess it starts, C code or a thread it leaves behind writes to the process's
file descriptor 1 directly. With ``--json`` the command therefore runs with descriptor 1
pointing at stderr, and ``sys.stdout`` writing to a private copy of the original
descriptor: only agac's own document reaches the real stdout.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["json_stdout"]


@contextmanager
def json_stdout(enabled: bool) -> Iterator[None]:
    """Keep descriptor 1 for agac's own output while the command runs (``enabled``, and
    ``sys.stdout`` is the process's real descriptor 1; a test runner's capture is left
    alone)."""
    original = sys.stdout
    if not (
        enabled
        and isinstance(original, io.TextIOWrapper)
        and original is sys.__stdout__
        and _is_fd1(original)
    ):
        yield
        return
    original.flush()
    saved = os.dup(1)
    private = io.TextIOWrapper(
        io.FileIO(saved, "w", closefd=True),
        encoding=original.encoding,
        errors=original.errors,
        line_buffering=original.line_buffering,
        write_through=True,
    )
    os.dup2(2, 1)
    sys.stdout = private
    try:
        yield
    finally:
        try:
            private.flush()
        finally:
            sys.stdout = original
            os.dup2(saved, 1)
            private.close()


def _is_fd1(stream: io.TextIOWrapper) -> bool:
    try:
        return stream.fileno() == 1
    except (AttributeError, OSError, ValueError):
        return False
