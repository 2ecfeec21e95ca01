"""Which exceptions of user code fail only its unit, and which stop agac."""

from __future__ import annotations

import asyncio

import pytest

from agac.errors import RetryableError
from agac.usercode import describe, fails_only_its_unit, is_retryable


class Custom(BaseException):
    pass


@pytest.mark.parametrize(
    "exc",
    [
        SystemExit(0),
        SystemExit(3),
        SystemExit(),
        Custom("x"),
        KeyError("k"),
        ValueError("v"),
        MemoryError(),
    ],
)
def test_tool_base_exception_fails_only_its_unit(exc: BaseException) -> None:
    assert fails_only_its_unit(exc)


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), GeneratorExit()])
def test_stop_requests_are_not_a_tool_failure(exc: BaseException) -> None:
    assert not fails_only_its_unit(exc)


async def test_cancelled_error_of_the_tool_fails_its_unit() -> None:
    """Raised by the tool itself: no one is cancelling the task."""

    async def tool() -> bool:
        try:
            raise asyncio.CancelledError("mine")
        except asyncio.CancelledError as exc:
            return fails_only_its_unit(exc)

    assert await asyncio.create_task(tool())


async def test_cancelled_error_while_agac_cancels_propagates() -> None:
    """agac cancelling the task (Ctrl-C twice, a stopping run) is not the tool's failure."""
    seen: list[bool] = []
    started = asyncio.Event()

    async def tool() -> None:
        try:
            started.set()
            await asyncio.sleep(10)
        except asyncio.CancelledError as exc:
            seen.append(fails_only_its_unit(exc))
            raise

    task = asyncio.create_task(tool())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == [False]


def test_only_retryable_error_is_retried() -> None:
    assert is_retryable(RetryableError("busy"))
    assert not is_retryable(KeyError("k"))
    assert not is_retryable(SystemExit(1))


@pytest.mark.parametrize(
    ("exc", "said"),
    [
        (SystemExit(3), "SystemExit: 3"),
        (SystemExit(0), "SystemExit: 0"),
        (SystemExit(), "SystemExit: None"),
        (SystemExit("bye"), "SystemExit: 'bye'"),
        (KeyError("text"), "KeyError: 'text'"),
        (Custom(), "Custom"),
    ],
)
def test_exception_is_named(exc: BaseException, said: str) -> None:
    assert describe(exc) == said


def test_agac_exports_retryable_error() -> None:
    import agac

    assert agac.RetryableError is RetryableError


def test_i29_11_user_code_prints_go_to_stderr_agac_prints_stay(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A tool printing in a worker thread while agac prints in its own: each write goes
    where it belongs, and ``sys.stdout`` is given back once the last tool is done."""
    import sys
    import threading

    from agac.usercode import user_stdout

    before = sys.stdout
    started, go_on = threading.Event(), threading.Event()

    def tool() -> None:
        with user_stdout():
            started.set()
            go_on.wait(120)  # the timeouts here only guard a hang
            print("from the tool")

    thread = threading.Thread(target=tool)
    thread.start()
    assert started.wait(120)
    print("from agac")  # while the tool is inside user code
    go_on.set()
    thread.join(120)

    assert sys.stdout is before
    out, err = capsys.readouterr()
    assert out == "from agac\n"
    assert err == "from the tool\n"


async def test_i29_11_async_user_code_prints_go_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agac.usercode import user_stdout

    async def tool() -> None:
        with user_stdout():
            await asyncio.sleep(0)
            print("tool")

    async def agac_itself() -> None:
        await asyncio.sleep(0)
        print("agac")

    await asyncio.gather(tool(), agac_itself())
    out, err = capsys.readouterr()
    assert (out, err) == ("agac\n", "tool\n")
