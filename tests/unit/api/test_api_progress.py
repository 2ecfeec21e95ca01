"""Progress where a person watches (docs/python.md): bars in a terminal or a notebook, a compact
line when the output is not a terminal."""

from __future__ import annotations

import io
from typing import Any

from agac.api.progress import RunProgress, progress_line
from agac.engine.outcomes.writer import Progress


def _progress() -> Progress:
    progress = Progress(["classify", "reply"], 4)
    for status in ("answered", "answered", "failed"):
        progress.bump("classify", status, 0.0015)
    progress.bump("reply", "skipped")
    progress.batches["reply"] = "1 batch out"
    return progress


def test_the_compact_line() -> None:
    assert progress_line(_progress()) == (
        "classify 3/4 (1 failed) · reply 1/4 (1 skipped, 1 batch out) · $0.0045"
    )


def test_line_mode_when_the_output_is_not_a_terminal() -> None:
    out = io.StringIO()
    view = RunProgress("auto", stream=out)
    assert view.kind == "line"
    progress = _progress()
    view.start(progress)
    view.stop()
    assert out.getvalue().splitlines()[-1] == f"progress: {progress_line(progress)}"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_in_a_terminal() -> None:
    out = _Terminal()
    view = RunProgress("auto", stream=out)
    assert view.kind == "bars"
    view.start(_progress())
    view.stop()
    text = out.getvalue()
    assert "classify" in text and "3/4" in text and "batch out" in text


class _Handle:
    def __init__(self) -> None:
        self.shown: list[Any] = []

    def update(self, obj: Any) -> None:
        self.shown.append(obj)


def test_bars_in_a_notebook_through_an_updatable_display() -> None:
    handle = _Handle()

    def display(obj: Any, display_id: bool = False) -> _Handle:
        assert display_id
        handle.shown.append(obj)
        return handle

    view = RunProgress("auto", display=display)
    assert view.kind == "notebook"
    view.start(_progress())
    view.stop()
    bundle = handle.shown[-1]._repr_mimebundle_(include=None, exclude=None)
    assert "classify" in bundle["text/plain"] and "3/4" in bundle["text/plain"]
    assert "<pre" in bundle["text/html"] and "classify" in bundle["text/html"]


def test_no_progress() -> None:
    for mode in (False, None):
        view = RunProgress(mode)
        assert view.kind is None
        view.start(_progress())
        view.stop()
