"""The run's graph: its workflow decoded once from the config frozen with the run.

A run stores the resolved workflow it was admitted with (``Workflow.snapshot()``) as JSON.
Everything in the engine that asks about the run's actions — their order, who depends on
whom, which run once per fan-out item, which are joins, their guards — reads this one
typed value (:func:`run_graph`), never the stored dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from agac.config.model import Workflow
from agac.engine.walk.steps import regions_of
from agac.prompt.render import Guard

if TYPE_CHECKING:
    from agac.config.fanout import Regions
    from agac.config.model import Action
    from agac.store.values import RunRecord

__all__ = ["RunGraph", "run_graph"]


@dataclass(frozen=True)
class RunGraph:
    """A workflow's actions as a graph (in the workflow's topological order)."""

    workflow: Workflow
    order: tuple[str, ...]
    """The actions' names, in order."""
    ancestors: Mapping[str, frozenset[str]]
    """action -> every action it depends on, transitively."""
    descendants: Mapping[str, frozenset[str]]
    """action -> every action that depends on it, transitively."""
    regions: Regions | None
    """The fan-out structure; None when no action fans out or joins."""
    joins: frozenset[str]
    """The join actions."""
    guards: Mapping[str, Guard]
    """action -> its compiled ``when:`` guard (actions without one are absent)."""

    @classmethod
    def of(cls, workflow: Workflow) -> RunGraph:
        actions = workflow.actions
        below: dict[str, set[str]] = {a.name: set() for a in actions}
        for a in actions:
            for up in a.ancestors:
                below[up].add(a.name)
        fans = any(a.fan_out is not None or a.join is not None for a in actions)
        return cls(
            workflow=workflow,
            order=tuple(a.name for a in actions),
            ancestors=MappingProxyType({a.name: frozenset(a.ancestors) for a in actions}),
            descendants=MappingProxyType({k: frozenset(v) for k, v in below.items()}),
            regions=regions_of(actions) if fans else None,
            joins=frozenset(a.name for a in actions if a.join is not None),
            guards=MappingProxyType({a.name: Guard.compile(a.when) for a in actions if a.when}),
        )

    @property
    def actions(self) -> tuple[Action, ...]:
        return self.workflow.actions

    def action(self, name: str) -> Action:
        return self.workflow.action(name)

    def llm_actions(self) -> frozenset[str]:
        return frozenset(a.name for a in self.actions if a.kind == "llm")


def run_graph(run: RunRecord) -> RunGraph:
    """The graph of ``run``'s frozen config (read once where a run is loaded: a sweep, a
    report, a retry; never per unit)."""
    return RunGraph.of(Workflow.from_snapshot(run.config))
