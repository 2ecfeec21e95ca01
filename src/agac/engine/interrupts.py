"""Ctrl-C and SIGTERM (docs/guarantees.md, Runs): the first signal stops sending and waiting, the second
stops at once.

- **First.** ``on_first`` runs (the executor or worker stops sending) and the
  :class:`StopSignal` wakes every sleeper at once: a ``--wait`` poll, a retry backoff, a
  provider's ``Retry-After``, a rate-limit window, a heartbeat. What is in flight settles
  and is committed; nothing new starts. The process exits within about a second plus
  the time the calls in flight take.
- **Second.** The main task is cancelled: calls in flight are abandoned (their usage is
  covered by the dispatch marks, S1), the store gateway commits what it holds and closes,
  and ``asyncio.run`` returns without a pending task. A third signal is ignored (the
  process is already stopping at once).

Nothing raises ``KeyboardInterrupt`` from a signal handler: an exception raised inside
the event loop's callback leaves tasks pending ("Task was destroyed but it is pending!").
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

__all__ = ["StopSignal", "install_interrupts"]


class StopSignal:
    """Set once when a run or a worker is told to stop; sleepers wake at once."""

    def __init__(self) -> None:
        self.is_set = False
        self._event: asyncio.Event | None = None

    def set(self) -> None:
        self.is_set = True
        if self._event is not None:
            self._event.set()

    async def sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` or until the signal is set; True when it was set."""
        if self.is_set:
            return True
        if seconds <= 0:
            await asyncio.sleep(0)
            return self.is_set
        if self._event is None:
            self._event = asyncio.Event()
        try:
            await asyncio.wait_for(self._event.wait(), seconds)
        except TimeoutError:
            pass
        return self.is_set


def install_interrupts(
    on_first: Callable[[], None],
    signals: tuple[signal.Signals, ...] = (signal.SIGINT,),
) -> Callable[[], None]:
    """Handle ``signals`` in the running loop (call it from the main task); returns the
    function that removes the handlers."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    hits = 0

    def handler() -> None:
        nonlocal hits
        hits += 1
        if hits == 1:
            on_first()
        elif hits == 2 and main is not None:
            main.cancel()

    for sig in signals:
        loop.add_signal_handler(sig, handler)

    def restore() -> None:
        for sig in signals:
            loop.remove_signal_handler(sig)

    return restore
