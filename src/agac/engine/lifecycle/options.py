"""What a run call takes and what it returns: :class:`RunOptions` (``agac run`` and its
flags as a library call) and :class:`RunResult` (the §7.1 summary, notes, exit code)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from agac.store.values import DEFAULT_TENANT, FINAL_STATES

if TYPE_CHECKING:
    from agac.config.model import Workflow
    from agac.data.sources import RecordSource
    from agac.engine.outcomes.writer import Progress
    from agac.engine.report.counts import ActionSummary
    from agac.engine.report.run import RunSummary
    from agac.engine.values import RunControl

__all__ = ["AsAdmitted", "RunOptions", "RunResult"]


class AsAdmitted(NamedTuple):
    """The workflow file loaded with the per-run settings an open run was admitted with
    (``overrides``), when they differ from today's: continuing the run (R1) compares it
    with the file as it was loaded for it, not with today's settings."""

    overrides: dict[str, Any]
    workflow: Workflow


@dataclass(frozen=True)
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
    """The per-run settings (``--run-mode``, ``--poll-interval``, ``--batch-deadline``,
    ``--budget-usd``) an admitted run is stored with; None values are not settings."""
    allow_over_estimate: bool = False
    tenant: str = DEFAULT_TENANT
    """The tenant the run belongs to (T2)."""
    source: RecordSource | None = None
    """The records a new run snapshots instead of ``input.path`` (``agac.run(records=…)``)."""


@dataclass
class RunResult:
    """What a run call returns: the §7.1 summary, the notes for the user, the exit code;
    the summary's main facts as attributes (``run_id``, ``state``, ``cost_usd``, …)."""

    summary: RunSummary
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def workflow(self) -> str:
        return self.summary.workflow

    @property
    def state(self) -> str:
        return self.summary.state

    @property
    def tenant(self) -> str:
        """The run's tenant (T2); ``default`` unless set."""
        return self.summary.tenant or DEFAULT_TENANT

    @property
    def actions(self) -> dict[str, ActionSummary]:
        """Per action: records, answered, failed, skipped, pending, calls, reused, …"""
        return self.summary.actions

    @property
    def cost_usd(self) -> float:
        return float(self.summary.cost_usd or 0.0)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    def to_dict(self) -> dict[str, Any]:
        """The summary with ``tenant``, ``exit_code``, ``interrupted`` and ``notes`` (JSON)."""
        return {
            **self.summary.to_dict(),
            "tenant": self.tenant,
            "exit_code": self.exit_code,
            "interrupted": self.interrupted,
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        counts = ", ".join(
            f"{name}: {a.answered}/{a.records} answered"
            + (f", {a.failed} failed" if a.failed else "")
            for name, a in self.actions.items()
        )
        return (
            f"<RunResult {self.run_id} {self.workflow} {self.state} ${self.cost_usd:.4f}"
            f" ({counts})>"
        )

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        state = self.summary.state
        if state == "succeeded":
            return 0
        if state in FINAL_STATES:
            return 1
        return 75
