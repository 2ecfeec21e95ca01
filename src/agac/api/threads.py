"""Running the engine off the caller's thread (docs/python.md): ``agac.run`` inside a running
event loop (Jupyter) and ``await agac.arun(…)``.

The engine runs its own event loop (``asyncio.run``) in the thread that calls it. Where
the caller's thread already runs a loop, that is impossible, so the whole call — admission
included — moves to a thread of its own and the caller waits for it: nothing is admitted
before the engine can start (no ``nest_asyncio``). Interrupting the wait (Ctrl-C, a
notebook's stop button, cancelling the awaiting task) asks the run to stop sending and
settle what is in flight, as the first Ctrl-C of ``agac run`` does; the call then returns
the interrupted run (exit code 130), which the next call continues.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["RunControl", "in_thread", "loop_running", "on_thread"]

T = TypeVar("T")


def loop_running() -> bool:
    """Whether this thread runs an event loop (Jupyter's cells do)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class RunControl:
    """The way into a run executing on another thread: ``attach`` is the engine's
    ``on_start`` hook (inside the engine's loop); ``stop`` may be called from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._control: Any = None
        self._stop = False

    def attach(self, progress: Any, control: Any) -> None:
        """``control``: the run's :class:`agac.engine.values.RunControl`."""
        with self._lock:
            self._loop, self._control = asyncio.get_running_loop(), control
            if self._stop:
                control.stop()

    def stop(self) -> None:
        with self._lock:
            self._stop = True
            if self._loop is not None and not self._loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                    self._loop.call_soon_threadsafe(self._control.stop)


def in_thread(call: Callable[[], T], control: RunControl) -> T:
    """``call()`` on a thread of its own; the caller blocks until it returns. A
    KeyboardInterrupt while waiting stops the run gently and keeps waiting for it."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="agac-run", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.1)
    except KeyboardInterrupt:
        control.stop()
        while thread.is_alive():
            thread.join(0.1)
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


async def on_thread(call: Callable[[], T], control: RunControl) -> T:
    """``await`` ``call()`` running on a thread of its own. Cancelling the awaiting task stops
    the run gently, waits until it has settled, then lets the cancellation through."""
    future = asyncio.get_running_loop().run_in_executor(None, call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        control.stop()
        with contextlib.suppress(Exception):
            await future  # not cancelled itself: the shield kept it
        raise
