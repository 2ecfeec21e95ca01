"""The steps a record walks (docs/workflow-reference.md, Fan-out and join): the workflow's actions in topological order,
with each fan-out condensed into one :class:`Region` step (the fan-out action and the
steps that run once per item, themselves steps, so regions nest). A workflow without
fan-outs is a plan with no regions: its steps are its actions.

Also the counting the store needs of the same structure: how many units an action has
once parents fanned out (:func:`expected_units`), and the unit keys of one record
(:func:`unit_keys`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from agac.config.fanout import Node, Regions, resolve_regions
from agac.engine.limits.rates import Slots
from agac.keys import escape, item_key

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agac.config.model import Action, Workflow
    from agac.engine.actions import ActionRuntime

__all__ = ["Region", "StepPlan", "expected_units", "has_fan_out", "regions_of", "unit_keys"]


@dataclass
class Region:
    """A fan-out action and the steps that run once per item."""

    fan: ActionRuntime
    steps: list[Step] = field(default_factory=list)
    members: frozenset[str] = frozenset()
    slots: Slots | None = None
    item_actions: tuple[str, ...] = ()
    """Every action that runs once per item of this fan-out (nested ones included)."""


Step = Union["ActionRuntime", Region]
"""An :class:`~agac.engine.actions.ActionRuntime` or a :class:`Region`."""


def regions_of(actions: Sequence[Action]) -> Regions:
    """The fan-out structure of resolved actions (in topological order)."""
    return resolve_regions(
        [
            Node(
                a.name,
                a.dependencies,
                a.ancestors,
                fan_out=a.fan_out is not None,
                join=a.join,
                is_join=a.join is not None,
            )
            for a in actions
        ]
    )


def has_fan_out(workflow: Workflow) -> bool:
    return any(a.fan_out is not None or a.join is not None for a in workflow.actions)


class StepPlan:
    """The steps of a record: the runtimes in order, regions where the workflow fans out."""

    def __init__(self, runtimes: list[ActionRuntime], fans_out: bool) -> None:
        self.by_name = {rt.name: rt for rt in runtimes}
        self.order = [rt.name for rt in runtimes]
        self.regions = regions_of([rt.action for rt in runtimes]) if fans_out else None
        self.steps: list[Step] = self._level(()) if self.regions is not None else list(runtimes)

    def per_item(self, action: str) -> bool:
        """Whether ``action`` runs once per item of a fan-out."""
        return self.regions is not None and self.regions.per_item(action)

    def _level(self, scope: tuple[str, ...]) -> list[Step]:
        """Steps at ``scope``: its actions, and one region per fan-out opened from it, in a
        stable topological order of the condensed graph."""
        regions = self.regions
        assert regions is not None
        depth = len(scope)
        unit_of: dict[str, str] = {}
        for name in self.order:
            s = regions.scope[name]
            if s[:depth] == scope and len(s) >= depth:
                unit_of[name] = name if len(s) == depth else "@" + s[depth]
        units = list(dict.fromkeys(unit_of.values()))
        deps: dict[str, set[str]] = {u: set() for u in units}
        for name, unit in unit_of.items():
            for dep in self.by_name[name].action.dependencies:
                other = unit_of.get(dep)
                if other is not None and other != unit:
                    deps[unit].add(other)
        position = {u: i for i, u in enumerate(units)}
        done: list[str] = []
        ready = [u for u in units if not deps[u]]
        while ready:
            ready.sort(key=position.__getitem__)
            u = ready.pop(0)
            done.append(u)
            for v in units:
                if u in deps[v]:
                    deps[v].discard(u)
                    if not deps[v] and v not in done and v not in ready:
                        ready.append(v)
        steps: list[Step] = []
        for u in done:
            if u.startswith("@"):
                fan = self.by_name[u[1:]]
                region = Region(
                    fan,
                    self._level(scope + (fan.name,)),
                    frozenset(regions.members[fan.name]),
                    Slots(max(1, fan.action.max_concurrency)),
                    tuple(a for a in self.order if fan.name in regions.scope[a]),
                )
                steps.append(region)
            else:
                steps.append(self.by_name[u])
        return steps


def expected_units(
    regions: Regions, action: str, records: int, totals: dict[str, tuple[int, int]]
) -> int:
    """How many units ``action`` has (docs/cli.md, agac status): records at record level; inside a
    fan-out, one per item of every parent that fanned out plus one per parent that did
    not (yet, or could not)."""
    count = records
    for fan in regions.scope.get(action, ()):
        parents, items = totals.get(fan, (0, 0))
        count = count - parents + items
    return max(count, 0)


def unit_keys(
    regions: Regions, action: str, record_key: str, expansions: dict[tuple[str, str], int]
) -> list[str]:
    """The unit keys of ``action`` for one record (its key as in the input), given the
    stored fan-outs."""
    keys = [escape(record_key)]
    for fan in regions.scope.get(action, ()):
        nxt: list[str] = []
        for k in keys:
            n = expansions.get((fan, k))
            nxt.extend([k] if n is None else (item_key(k, i) for i in range(n)))
        keys = nxt
    return keys
