"""What agac does with an exception raised by user code (a tool, a compensation, a tool
module's top-level code): it fails that unit, never agac.

A tool is user code: it may call ``sys.exit``, raise ``SystemExit`` or any other
``BaseException``, or leak a ``CancelledError`` of its own. None of that may end the run,
leave it ``running`` behind a silent exit, or let asyncio print tracebacks. Three
exceptions still go through, because they are not the tool's failure but a request to
stop agac itself: ``KeyboardInterrupt`` (Ctrl-C), ``GeneratorExit`` (a coroutine being
closed) and a ``CancelledError`` raised while agac is cancelling the task
(``Task.cancelling()``).

User code may also print. What it writes to ``sys.stdout`` while agac imports or calls it
goes to ``sys.stderr`` instead (:func:`user_stdout`): agac's stdout is its own (with
``--json`` it carries exactly one JSON document).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TextIO

from agac.errors import RetryableError
from agac.jsontext import storable_text

__all__ = ["describe", "fails_only_its_unit", "is_retryable", "user_stdout"]


def fails_only_its_unit(exc: BaseException) -> bool:
    """True when ``exc``, raised by user code, fails that unit (``tool_error``) and the run
    goes on; False when it must propagate (agac itself is being stopped)."""
    if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
        return False
    # asyncio is not imported to check: without it no CancelledError exists (agac validate
    # resolves tool functions and stays light).
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None and isinstance(exc, asyncio.CancelledError):
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running loop: nobody is cancelling us
            return True
        return not (task is not None and task.cancelling())
    return True


def is_retryable(exc: BaseException) -> bool:
    """Only an error the tool marks retryable (``agac.RetryableError``) gets another
    attempt: a KeyError or TypeError fails the same way every time."""
    return isinstance(exc, RetryableError)


def describe(exc: BaseException) -> str:
    """``SystemExit: 3``, ``KeyError: 'text'`` — the exception named, with its text (a lone
    surrogate in it escaped, so it can be stored)."""
    name = type(exc).__name__
    if isinstance(exc, SystemExit):
        return f"{name}: {exc.code!r}" if exc.code is not None else f"{name}: None"
    text = storable_text(str(exc))
    return f"{name}: {text}" if text else name


_IN_USER_CODE: ContextVar[bool] = ContextVar("agac_in_user_code", default=False)


class _StdoutRouter:
    """``sys.stdout`` while user code runs: a write made inside :func:`user_stdout` (that
    thread, that task, and what they start with a copy of their context) goes to
    ``sys.stderr``; every other write to the stream this one replaced. Tools run in
    threads next to agac's own code, so swapping ``sys.stdout`` for each call would send
    agac's writes astray too."""

    def __init__(self, stdout: TextIO) -> None:
        self.replaced = stdout

    def _target(self) -> TextIO:
        if _IN_USER_CODE.get():
            return sys.stderr if sys.stderr is not None else self.replaced
        return self.replaced

    def write(self, text: str) -> int:
        return self._target().write(text)

    def writelines(self, lines: Any) -> None:
        self._target().writelines(lines)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


class _Routing:
    """Installs the router while any user code runs, and takes it away after the last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0

    def enter(self) -> None:
        with self._lock:
            self._depth += 1
            if not isinstance(sys.stdout, _StdoutRouter) and sys.stdout is not None:
                sys.stdout = _StdoutRouter(sys.stdout)  # type: ignore[assignment]

    def leave(self) -> None:
        with self._lock:
            self._depth -= 1
            current = sys.stdout
            if self._depth == 0 and isinstance(current, _StdoutRouter):
                current.flush()
                sys.stdout = current.replaced


_ROUTING = _Routing()


@contextmanager
def user_stdout() -> Iterator[None]:
    """Run user code (a tool module's import, a tool's call) with its prints on stderr.

    Thread-safe and re-entrant: sync tools run in worker threads (which inherit the
    flag through ``asyncio.to_thread``'s context copy), async tools in their unit's task.
    Output written to file descriptor 1 directly (a subprocess, C code) is not Python's
    to route; ``agac … --json`` keeps it off its stdout by its own means
    (:mod:`agac.cli.streams`)."""
    token = _IN_USER_CODE.set(True)
    _ROUTING.enter()
    try:
        yield
    finally:
        _IN_USER_CODE.reset(token)
        _ROUTING.leave()
