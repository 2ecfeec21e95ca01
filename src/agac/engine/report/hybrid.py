"""How the run's actions run where it was chosen for them: ``run_mode: auto``'s choice at
admission, and each hybrid action's instant to go live (B13)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agac.engine.batch.hybrid import LIVE_STATE

if TYPE_CHECKING:
    from agac.engine.graph import RunGraph
    from agac.store.values import RunRecord

__all__ = ["AutoChoice", "HybridSwitch", "auto_modes", "hybrid_switches"]


@dataclass(frozen=True)
class AutoChoice:
    """The mode ``run_mode: auto`` chose, and why: the reason code and its words."""

    mode: str
    why: str


@dataclass(frozen=True)
class HybridSwitch:
    """B13: the instant a hybrid action goes live, and whether it has switched."""

    live_at: float
    switched: bool


def auto_modes(graph: RunGraph) -> dict[str, AutoChoice]:
    """What ``run_mode: auto`` chose at admission for each action it chose for."""
    return {
        a.name: AutoChoice(str(a.run_mode), a.auto_choice) for a in graph.actions if a.auto_choice
    }


def hybrid_switches(
    run: RunRecord, states: dict[str, tuple[str, str | None]]
) -> dict[str, HybridSwitch]:
    """Per hybrid action of the run (``states``: the store's action states)."""
    return {
        a: HybridSwitch(at, states.get(a, ("", None))[0] == LIVE_STATE)
        for a, at in run.settings.live_at.items()
    }
