"""Progress of a run where a person watches it (docs/cli.md, agac events; docs/python.md): a Rich live display in a
terminal or a notebook, or a compact line now and then when the output is not a terminal.

``progress=`` of :func:`agac.run` picks it: ``"auto"`` (the default) shows bars in Jupyter
and in a terminal and lines otherwise; ``"bars"``, ``"line"`` or ``False`` force one. The
view reads the engine's live counters from a thread of its own, so it never slows the run;
the store stays the truth (``agac.status``).

In a notebook the bars are rendered by Rich to HTML (and text) and shown through IPython's
updatable display, so they need no widget library.
"""

from __future__ import annotations

import io
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, Literal

__all__ = ["Pace", "ProgressMode", "RunProgress", "progress_line", "progress_table"]

ProgressMode = Literal["auto", "bars", "line"] | bool | None

_TICK = 0.25
_LINE_EVERY = 10.0


def _total(progress: Any, action: str) -> int:
    """An action's units so far: fan-outs add their items as parents fan out."""
    return int(getattr(progress, "totals", {}).get(action, progress.total))


class Pace:
    """How fast this process settles units: from the units done when the view started
    (a resumed run's earlier ones do not count) to those done ``elapsed`` seconds later."""

    def __init__(self, progress: Any, started: float) -> None:
        self.started = started
        self.done_at_start = _done(progress)

    def text(self, progress: Any, now: float) -> str:
        """``12.5 units/s, ETA 3m20s``; empty until this process settled a unit (the
        line then shows no pace); ETA ``-`` when nothing is left."""
        elapsed = max(now - self.started, 0.0)
        done = _done(progress) - self.done_at_start
        if done <= 0 or elapsed <= 0:
            return ""
        rate = done / elapsed
        left = max(_left(progress), 0)
        eta = _duration(left / rate) if left else "-"
        return f"{_rate(rate)}, ETA {eta}"


def _done(progress: Any) -> int:
    return sum(progress.done(a) for a in progress.actions)


def _left(progress: Any) -> int:
    return sum(_total(progress, a) - progress.done(a) for a in progress.actions)


def _rate(per_second: float) -> str:
    if per_second >= 1:
        return f"{per_second:,.1f} units/s"
    return f"{per_second * 60:,.1f} units/min"


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def progress_line(progress: Any, pace: str | None = None) -> str:
    """One compact line: ``classify 120/1000 (2 failed) · reply 40/1000 · $0.0123`` and,
    given, the pace: ``· 12.5 units/s, ETA 2m30s``."""
    parts, cost = [], 0.0
    for action, row in progress.actions.items():
        text = f"{action} {progress.done(action)}/{_total(progress, action)}"
        extra = [f"{row[k]} {k}" for k in ("failed", "skipped") if row[k]]
        if progress.batches.get(action):
            extra.append(str(progress.batches[action]))
        parts.append(text + (f" ({', '.join(extra)})" if extra else ""))
        cost += row["cost"]
    return " · ".join(parts) + f" · ${cost:.4f}" + (f" · {pace}" if pace else "")


def progress_table(progress: Any) -> Any:
    """The bars, one per action, as a Rich renderable."""
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    table = Table(box=None, show_header=False, padding=(0, 1))
    for action, row in progress.actions.items():
        total, done = _total(progress, action), progress.done(action)
        extra = f"failed {row['failed']}  skipped {row['skipped']}  ${row['cost']:.4f}"
        if progress.batches.get(action):
            extra += f"  {progress.batches[action]}"
        table.add_row(
            action,
            ProgressBar(total=max(total, 1), completed=done, width=32),
            f"{done}/{total}",
            extra,
        )
    return table


class RunProgress:
    """A view started with the run (``start(progress, control)``, the engine's ``on_start``)
    and stopped when the call returns."""

    def __init__(
        self,
        mode: ProgressMode = "auto",
        *,
        stream: IO[str] | None = None,
        display: Callable[..., Any] | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.kind = self._kind(mode, display)
        self._display = display
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _kind(self, mode: ProgressMode, display: Callable[..., Any] | None) -> str | None:
        if mode is False or mode is None:
            return None
        if mode in ("bars", "line"):
            return "notebook" if mode == "bars" and (display or _in_notebook()) else str(mode)
        if display is not None or _in_notebook():
            return "notebook"
        return "bars" if self.stream.isatty() else "line"

    def start(self, progress: Any, control: Any = None) -> None:
        if self.kind is None or self._thread is not None:
            return
        target = {"bars": self._terminal, "line": self._lines, "notebook": self._notebook}[
            self.kind
        ]
        self._thread = threading.Thread(
            target=target, args=(progress,), daemon=True, name="agac-progress"
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _terminal(self, progress: Any) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream)
        with Live(
            progress_table(progress), console=console, refresh_per_second=4, transient=False
        ) as live:
            while not self._stop.wait(_TICK):
                live.update(progress_table(progress))
            live.update(progress_table(progress))

    def _lines(self, progress: Any) -> None:
        last, shown = "", 0.0
        pace = Pace(progress, time.monotonic())
        while not self._stop.wait(_TICK):
            line = progress_line(progress)
            if line != last and time.monotonic() - shown >= _LINE_EVERY:
                self._write(progress_line(progress, pace.text(progress, time.monotonic())))
                last, shown = line, time.monotonic()
        line = progress_line(progress)
        if line != last:
            self._write(progress_line(progress, pace.text(progress, time.monotonic())))

    def _write(self, line: str) -> None:
        self.stream.write(f"progress: {line}\n")
        self.stream.flush()

    def _notebook(self, progress: Any) -> None:
        display = self._display or _ipython_display()
        handle = display(_rendered(progress), display_id=True)
        while not self._stop.wait(_TICK * 2):
            handle.update(_rendered(progress))
        handle.update(_rendered(progress))


def _in_notebook() -> bool:
    """Rich's own test (an IPython kernel: Jupyter, VS Code, Colab, Databricks)."""
    from rich.console import Console

    return bool(Console(file=io.StringIO()).is_jupyter)


def _ipython_display() -> Callable[..., Any]:
    from IPython.display import display  # present wherever a notebook runs

    return display  # type: ignore[no-any-return]


def _rendered(progress: Any) -> Any:
    """The bars as a notebook shows them: HTML (with inline styles) and plain text."""
    from rich.console import Console
    from rich.jupyter import JupyterRenderable

    console = Console(
        file=io.StringIO(), record=True, width=110, force_terminal=True, color_system="truecolor"
    )
    console.print(progress_table(progress))
    text = console.export_text(clear=False)
    return JupyterRenderable(console.export_html(inline_styles=True), text)
