"""What agac does with an exception raised by user code (a tool, a compensation, a tool
module's top-level code): it fails that unit, never agac.

A tool is user code: it may call ``sys.exit``, raise ``SystemExit`` or any other
``BaseException``, or leak a ``CancelledError`` of its own. None of that may end the run,
leave it ``running`` behind a silent exit, or let asyncio print tracebacks. Three
exceptions still go through, because they are not the tool's failure but a request to
stop agac itself: ``KeyboardInterrupt`` (Ctrl-C), ``GeneratorExit`` (a coroutine being
closed) and a ``CancelledError`` raised while agac is cancelling the task
(``Task.cancelling()``).
"""

from __future__ import annotations

import sys

from agac.errors import RetryableError

__all__ = ["describe", "fails_only_its_unit", "is_retryable"]


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
    """``SystemExit: 3``, ``KeyError: 'text'`` — the exception named, with its text."""
    name = type(exc).__name__
    if isinstance(exc, SystemExit):
        return f"{name}: {exc.code!r}" if exc.code is not None else f"{name}: None"
    text = str(exc)
    return f"{name}: {text}" if text else name
