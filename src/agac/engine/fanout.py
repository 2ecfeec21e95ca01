"""Fan-out and join inside a record's pipeline (DESIGN §11).

A record whose workflow has fan-outs walks a *plan* instead of the flat list of
actions: a list of steps where a step is an action or a :class:`Region` (a fan-out
action and the actions that run once per item, themselves steps, so regions nest).
Actions stay in topological order; a region is one step at the level it fans out from,
and its joins are ordinary steps after it at that level.

Items are ordinary units: their outcomes, answers, usage and events are keyed by the
item key ``<parent key>/<index>`` (0-based, request order) and carry their record's
``seq``, so resume, reuse (R1), status, export, retry and gc treat them like any unit.
The item count of each parent is stored (``fanouts``) when it fans out, so counts of
item units come from the store (DESIGN §7.1).

A parent that cannot fan out — its record is invalid, an upstream unit failed or was
skipped, or the list field is missing — has *one* unit under its own key in every
action of the region (failed or skipped with the reason, like any unit), so every
unit is still in exactly one bucket and the join sees the failure.

A list of zero items fans out into no items: the join still runs once for the parent,
with ``fulfilled`` and ``rejected`` empty.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agac.config.fanout import Node, Regions, resolve_regions
from agac.engine.limits import Slots
from agac.engine.units import Settled, Stopped, run_unit
from agac.keys import escape, item_key, needs_escaping

if TYPE_CHECKING:
    from agac.config.model import Workflow
    from agac.engine.actions import ActionRuntime
    from agac.engine.executor import Executor

__all__ = ["FanOutPlan", "ItemRecord", "Region", "expected_units", "regions_of", "unit_keys"]

HALTING = frozenset({"budget_exhausted", "deadline", "cancelled", "batch_outstanding"})
"""Skip reasons that say the run stopped, not that an item failed: a parent with such an
item is skipped with the same reason instead of joining a partial list."""


@dataclass(frozen=True, slots=True)
class ItemRecord:
    """One item as a unit's record: the item key, its record's seq and file."""

    key: str
    seq: int
    file: str
    n: int
    line: int
    record_key: str
    item_key: str
    custom: str
    """The base of its batch custom_id (``r<seq>_<i>_<j>``, within ``^[a-zA-Z0-9_-]+$``)."""
    reason: str | None = None
    error: str | None = None
    payload: str | None = None


@dataclass(frozen=True, slots=True)
class KeyedRecord:
    """A record whose key holds ``/`` or ``%``, as its units' record: ``key`` is its unit
    key (escaped, agac/keys.py), ``record_key`` the key as in the input."""

    key: str
    record_key: str
    seq: int
    file: str
    n: int
    line: int
    payload: str | None
    reason: str | None
    error: str | None


def as_unit_record(row: Any) -> Any:
    """A record row as its units' record: itself, unless its key must be escaped."""
    if not needs_escaping(row.key):
        return row
    return KeyedRecord(escape(row.key), row.key, row.seq, row.file, row.n, row.line,
                       row.payload, row.reason, row.error)


@dataclass
class Region:
    """A fan-out action and the steps that run once per item."""

    fan: ActionRuntime
    steps: list[Any] = field(default_factory=list)
    members: frozenset[str] = frozenset()
    slots: Slots | None = None


def regions_of(actions: Any) -> Regions:
    """The fan-out structure of resolved actions (Action objects or their snapshot dicts)."""
    nodes = []
    for a in actions:
        get = a.get if isinstance(a, dict) else (lambda k, a=a: getattr(a, k, None))
        nodes.append(Node(str(get("name")), tuple(get("dependencies") or ()), tuple(get("ancestors") or ()),
                          fan_out=get("fan_out") is not None, join=get("join"),
                          is_join=get("join") is not None))
    return resolve_regions(nodes)


def has_fan_out(workflow: Workflow) -> bool:
    return any(a.fan_out is not None or a.join is not None for a in workflow.actions)


class FanOutPlan:
    """The steps of a record for a workflow with fan-outs."""

    def __init__(self, runtimes: list[ActionRuntime]) -> None:
        self.regions = regions_of([rt.action for rt in runtimes])
        self.by_name = {rt.name: rt for rt in runtimes}
        self.order = [rt.name for rt in runtimes]
        self.steps = self._level(())
        self._item_actions = {fan: [a for a in self.order if fan in self.regions.scope[a]]
                              for fan in self.regions.fan_outs}

    def per_item(self, action: str) -> bool:
        return self.regions.per_item(action)

    def _level(self, scope: tuple[str, ...]) -> list[Any]:
        """Steps at ``scope``: its actions, and one region per fan-out opened from it, in a
        stable topological order of the condensed graph."""
        depth = len(scope)
        unit_of: dict[str, str] = {}
        for name in self.order:
            s = self.regions.scope[name]
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
        steps: list[Any] = []
        for u in done:
            if u.startswith("@"):
                fan = self.by_name[u[1:]]
                region = Region(fan, self._level(scope + (fan.name,)),
                                frozenset(self.regions.members[fan.name]),
                                Slots(max(1, fan.action.max_concurrency)))
                steps.append(region)
            else:
                steps.append(self.by_name[u])
        return steps

    # -- walking ------------------------------------------------------------------------

    async def walk_record(self, ex: Executor, rec: Any, payload: Any,
                          existing: dict[tuple[str, str], Settled]) -> bool:
        return await self._walk(ex, self.steps, rec, payload, {}, existing, {})

    async def _walk(self, ex: Executor, steps: list[Any], rec: Any, payload: Any,
                    results: dict[str, Settled], existing: dict[tuple[str, str], Settled],
                    extra: dict[str, Any]) -> bool:
        collected: dict[str, list[tuple[str, dict[str, Settled]]] | None] = {}
        for step in steps:
            if isinstance(step, Region):
                got_items = await self._region(ex, step, rec, payload, results, existing, extra)
                if got_items is False:
                    return False
                collected[step.fan.name] = got_items if isinstance(got_items, list) else None
                continue
            rt = step
            got = existing.get((rt.name, rec.key))
            if got is None:
                try:
                    if rt.action.join is not None:
                        got = await self._join(ex, rt, rec, payload, results, extra,
                                               collected.get(rt.action.join))
                    else:
                        got = await run_unit(ex, rt, rec, payload, results, extra)
                except Stopped:
                    got = None
                if got is None:
                    return False
            results[rt.name] = got
        return True

    async def _region(self, ex: Executor, region: Region, rec: Any, payload: Any,
                      results: dict[str, Settled], existing: dict[tuple[str, str], Settled],
                      extra: dict[str, Any]) -> list[tuple[str, dict[str, Settled]]] | bool:
        """Run a region for one parent. The items' results in request order; True when the
        parent could not fan out (its region units settled under the parent's key); False
        when something is still pending."""
        fan = region.fan.action
        spec = fan.fan_out
        assert spec is not None
        ready = rec.reason is None and all(
            (r := results.get(d)) is not None and r.status == "answered" for d in fan.dependencies)
        values: list[Any] | None = None
        if ready:
            if spec.versions is not None:
                values = list(range(spec.versions))
            else:
                values, problem = _list_at(payload, results, spec.over or "")
                if values is None:
                    return await self._cannot_fan_out(ex, region, rec, payload, results, existing,
                                                      extra, problem)
        if values is None:
            # The parent's own dependencies decide: every unit of the region settles under
            # the parent's key (skipped upstream_failed, or with the upstream's skip reason).
            inner = dict(results)
            done = await self._walk(ex, region.steps, rec, payload, inner, existing, extra)
            if done:
                results.update({k: v for k, v in inner.items() if k in region.members})
            return done
        ex.gateway.commit_nowait(fanouts=[{
            "run_id": ex.run_id, "action": fan.name, "parent_key": rec.key, "seq": rec.seq,
            "items": len(values), "created_at": time.time()}])
        ex.progress.fanned_out(fan.name, rec.key, self._item_actions[fan.name], len(values))
        name = "version" if spec.versions is not None else spec.as_name
        items = self._items(rec, len(values))

        async def one(i: int) -> tuple[bool, dict[str, Settled]]:
            inner = dict(results)
            scope = {**extra, name: values[i]}
            if all((a, items[i].key) in existing for a in region.members):
                return await self._walk(ex, region.steps, items[i], payload, inner, existing,
                                        scope), inner
            assert region.slots is not None
            async with region.slots:
                if ex.stopping:
                    return False, inner
                ok = await self._walk(ex, region.steps, items[i], payload, inner, existing, scope)
            return ok, inner

        if fan.gate == "sequential":
            outs = []
            for i in range(len(items)):
                ok, inner = await one(i)
                outs.append((ok, inner))
                if not ok:
                    return False
        else:
            outs = list(await asyncio.gather(*(one(i) for i in range(len(items)))))
        if not all(ok for ok, _ in outs):
            return False
        return [(items[i].key, {k: v for k, v in inner.items() if k in region.members})
                for i, (_, inner) in enumerate(outs)]

    async def _cannot_fan_out(self, ex: Executor, region: Region, rec: Any, payload: Any,
                              results: dict[str, Settled], existing: dict[tuple[str, str], Settled],
                              extra: dict[str, Any], problem: str) -> bool:
        """The list field is missing or not a list: the fan-out unit of the parent fails
        ``fan_out_invalid``; the rest of the region is skipped ``upstream_failed``."""
        fan = region.fan
        got = existing.get((fan.name, rec.key))
        if got is None:
            got = await ex.settle(fan, rec, "failed", "fan_out_invalid", problem)
        inner = dict(results)
        inner[fan.name] = got
        done = await self._walk(ex, region.steps[1:], rec, payload, inner, existing, extra)
        if done:
            results.update({k: v for k, v in inner.items() if k in region.members})
        return done

    @staticmethod
    def _items(parent: Any, n: int) -> list[ItemRecord]:
        if isinstance(parent, ItemRecord):
            custom, record_key = parent.custom, parent.record_key
        else:  # a record (its key escaped in ``parent.key``, agac/keys.py)
            custom, record_key = f"r{parent.seq}", getattr(parent, "record_key", parent.key)
        key, seq, file, num, line = parent.key, parent.seq, parent.file, parent.n, parent.line
        return [ItemRecord(key=item_key(key, i), seq=seq, file=file, n=num, line=line,
                           record_key=record_key, item_key=item_key(key, i),
                           custom=f"{custom}_{i}")
                for i in range(n)]

    async def _join(self, ex: Executor, rt: ActionRuntime, rec: Any, payload: Any,
                    results: dict[str, Settled], extra: dict[str, Any],
                    items: list[tuple[str, dict[str, Settled]]] | None) -> Settled | None:
        action = rt.action
        if items is None:
            # The parent never fanned out: its region units are in ``results`` under the
            # parent's key, and the ordinary dependency rules skip the join.
            return await run_unit(ex, rt, rec, payload, results, extra)
        if rec.reason:
            return await ex.settle(rt, rec, "skipped", "upstream_failed", "the input record is invalid")
        for dep in action.dependencies:
            r = results.get(dep)
            if r is None:
                continue  # an input of the join: judged item by item below
            if r.status == "failed":
                return await ex.settle(rt, rec, "skipped", "upstream_failed", f"{dep} failed: {r.reason}")
            if r.status == "skipped":
                return await ex.settle(rt, rec, "skipped", r.reason, f"{dep} was skipped: {r.reason}")
        inputs = self.regions.join_inputs(action.name, action.dependencies)
        fulfilled, rejected, skipped, halt = judge(items, inputs)
        if halt is not None:
            return await ex.settle(rt, rec, "skipped", halt[0], halt[1])
        if rejected and action.failure_policy == "atomic":
            if action.kind != "tool":
                keys = ", ".join(r["key"] for r in rejected)
                return await ex.settle(rt, rec, "skipped", "join_atomic",
                                       f"{len(rejected)} of {len(items)} items failed ({keys}); "
                                       "failure_policy atomic")
            fulfilled = []
        if action.kind == "join":
            if ex.stopping:
                return None
            return await ex.settle(rt, rec, "answered", output={
                "fulfilled": fulfilled, "rejected": rejected, "skipped": skipped})
        scope = {**extra, "fulfilled": fulfilled, "rejected": rejected, "skipped": skipped}
        return await run_unit(ex, rt, rec, payload, results, scope)


def judge(items: list[tuple[str, dict[str, Settled]]], inputs: list[str]
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]],
                     tuple[str, str] | None]:
    """Split settled items, in request order, into fulfilled (key, output), rejected (key,
    reason, action) and skipped by a guard; or a reason to skip the parent when an item
    was never asked because the run stopped."""
    fulfilled: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for index, (key, res) in enumerate(items):
        states = [res[a] for a in inputs if a in res]
        if states and all(s.status == "answered" for s in states):
            output = states[0].output if len(inputs) == 1 else {
                a: res[a].output for a in inputs if a in res}
            fulfilled.append({"key": key, "index": index, "output": output})
            continue
        failure = next(((a, s) for a, s in res.items() if s.status == "failed"), None)
        if failure is not None:
            rejected.append({"key": key, "index": index, "action": failure[0],
                             "reason": failure[1].reason})
            continue
        reason = next((s.reason for s in states if s.status == "skipped"), None) or "guard"
        if reason in HALTING:
            return fulfilled, rejected, skipped, (reason, f"item {key} was not asked: {reason}")
        if reason == "guard":
            skipped.append({"key": key, "index": index, "reason": reason})
        else:
            # A skip that stands for a failure inside the item (an inner atomic join).
            rejected.append({"key": key, "index": index, "action": next(
                (a for a in inputs if a in res and res[a].status == "skipped"), None),
                "reason": reason})
    return fulfilled, rejected, skipped, None


def _list_at(payload: Any, results: dict[str, Settled], over: str) -> tuple[list[Any] | None, str]:
    root, *path = over.split(".")
    if root == "source":
        value: Any = payload
    else:
        r = results.get(root)
        value = r.output if r is not None else None
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return None, f"{over} is missing from {root}'s output"
        value = value[part]
    if not isinstance(value, list):
        return None, f"{over} is not a list (it is {type(value).__name__})"
    return value, ""


# -- counting and keys from the store ----------------------------------------------------------


def expected_units(regions: Regions, action: str, records: int,
                   totals: dict[str, tuple[int, int]]) -> int:
    """How many units ``action`` has (DESIGN §7.1): records at record level; inside a
    fan-out, one per item of every parent that fanned out plus one per parent that did
    not (yet, or could not)."""
    count = records
    for fan in regions.scope.get(action, ()):
        parents, items = totals.get(fan, (0, 0))
        count = count - parents + items
    return max(count, 0)


def unit_keys(regions: Regions, action: str, record_key: str,
              expansions: dict[tuple[str, str], int]) -> list[str]:
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


def rejoin_targets(store: Any, run_id: str, actions: list[dict[str, Any]],
                   targets: set[tuple[str, str]], seqs: dict[tuple[str, str], int],
                   ) -> set[tuple[str, str]]:
    """R2 for items: when an item is asked again, the join of its parent (and, nested, of
    every enclosing parent) is asked again, with every action downstream of that join at
    its level — they consumed the item's old outcome."""
    if not any(a.get("fan_out") or a.get("join") for a in actions):
        return set()
    regions = regions_of(actions)
    descendants: dict[str, set[str]] = {a["name"]: set() for a in actions}
    for a in actions:
        for anc in a["ancestors"]:
            descendants[anc].add(a["name"])
    out: set[tuple[str, str]] = set()
    for action, key in targets:
        seq = seqs.get((action, key))
        expansions = store.fanouts_between(run_id, seq, seq + 1) if seq is not None else {}
        scope = regions.scope.get(action, ())
        k = key
        for depth in range(len(scope) - 1, -1, -1):
            fan = scope[depth]
            parent, _, index = k.rpartition("/")
            if not (index.isdigit() and (fan, parent) in expansions):
                continue  # the parent never fanned out: its units share its key
            for join, of in regions.joins.items():
                if of != fan:
                    continue
                out.add((join, parent))
                out.update((x, parent) for x in descendants[join]
                           if regions.scope.get(x, ()) == scope[:depth])
            k = parent
    return out
