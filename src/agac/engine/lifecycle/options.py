"""What a run call takes and what it returns: :class:`RunOptions` (``agac run`` and its
flags as a library call) and :class:`RunResult` (the §7.1 summary, notes, exit code)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agac.store.values import DEFAULT_TENANT, FINAL_STATES

if TYPE_CHECKING:
    from agac.engine.outcomes.writer import Progress
    from agac.engine.values import RunControl

__all__ = ["RunOptions", "RunResult"]


@dataclass
class RunOptions:
    new: bool = False
    fresh: bool = False
    limit: int | None = None
    wait: bool = False
    handle_signals: bool = False
    on_progress: Callable[[Progress], None] | None = None
    on_start: Callable[[Progress, RunControl], None] | None = None
    """Called once the run's parts are assembled, with its live progress and its control
    (``control.stop()`` is the first Ctrl-C)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    allow_over_estimate: bool = False
    tenant: str = DEFAULT_TENANT
    """The tenant the run belongs to (DESIGN §13 T2)."""


@dataclass
class RunResult:
    summary: dict[str, Any]
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        state = self.summary["state"]
        if state == "succeeded":
            return 0
        if state in FINAL_STATES:
            return 1
        return 75
