"""A record's walk through its steps (docs/workflow-reference.md, Fan-out and join): each step is a unit of the record, or a
fan-out region the record's items walk. A workflow without fan-outs walks the same way,
with no regions.

Items are ordinary units: their outcomes, answers, usage and events are keyed by the
item key ``<parent key>/<index>`` (0-based, request order) and carry their record's
``seq``, so resume, reuse (R1), status, export, retry and gc treat them like any unit.
The item count of each parent is stored (``fanouts``) when it fans out, so counts of
item units come from the store (docs/cli.md, agac status).

A parent that cannot fan out — its record is invalid, an upstream unit failed or was
skipped, or the list field is missing — has *one* unit under its own key in every
action of the region (failed or skipped with the reason, like any unit), so every
unit is still in exactly one bucket and the join sees the failure.

A list of zero items fans out into no items: the join still runs once for the parent,
with ``fulfilled`` and ``rejected`` empty.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agac.engine.decision import Settle, UnitFacts, decide
from agac.engine.transitions import join_outcome
from agac.engine.values import Settled, Stopped
from agac.engine.walk.steps import Region
from agac.engine.walk.units import run_unit, settle
from agac.jsontext import JSON, JSONObject
from agac.keys import item_key

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from agac.engine.actions import ActionRuntime
    from agac.engine.ports import UnitContext
    from agac.engine.values import UnitRecord
    from agac.engine.walk.steps import Step, StepPlan

__all__ = ["ItemRecord", "Walker"]

Existing = dict[tuple[str, str], Settled]
Items = list[tuple[str, dict[str, Settled]]]


@dataclass(frozen=True, slots=True)
class ItemRecord:
    """One item of a fan-out as a unit's record: the item key, its record's seq and file."""

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


def _items(parent: UnitRecord, n: int) -> list[ItemRecord]:
    key = parent.key
    return [
        ItemRecord(
            key=item_key(key, i),
            seq=parent.seq,
            file=parent.file,
            n=parent.n,
            line=parent.line,
            record_key=parent.record_key,
            item_key=item_key(key, i),
            custom=f"{parent.custom}_{i}",
        )
        for i in range(n)
    ]


class Walker:
    """Walks records through a :class:`StepPlan`, one unit at a time per record."""

    def __init__(self, plan: StepPlan, ctx: UnitContext) -> None:
        self.plan = plan
        self.ctx = ctx

    def walk_record(
        self, rec: UnitRecord, payload: JSONObject | None, existing: Existing
    ) -> Coroutine[object, None, bool]:
        """True when every unit of the record has its outcome; False when one is pending
        (a batch, a person, an effect, the run stopping). The walk's own coroutine, not a
        wrapper around it: every suspension of a unit resumes through each frame above it."""
        return self._walk(self.plan.steps, rec, payload, {}, existing, {})

    async def _walk(
        self,
        steps: list[Step],
        rec: UnitRecord,
        payload: JSONObject | None,
        results: dict[str, Settled],
        existing: Existing,
        extra: JSONObject,
    ) -> bool:
        collected: dict[str, Items | None] = {}
        for step in steps:
            if isinstance(step, Region):
                got_items = await self._region(step, rec, payload, results, existing, extra)
                if got_items is False:
                    return False
                collected[step.fan.name] = got_items if isinstance(got_items, list) else None
                continue
            rt = step
            got = existing.get((rt.name, rec.key))
            if got is None:
                try:
                    if rt.action.join is not None:
                        got = await self._join(
                            rt, rec, payload, results, extra, collected.get(rt.action.join)
                        )
                    else:
                        got = await run_unit(self.ctx, rt, rec, payload, results, extra)
                except Stopped:
                    got = None
                if got is None:
                    return False
            results[rt.name] = got
        return True

    async def _region(
        self,
        region: Region,
        rec: UnitRecord,
        payload: JSONObject | None,
        results: dict[str, Settled],
        existing: Existing,
        extra: JSONObject,
    ) -> Items | bool:
        """Run a region for one parent. The items' results in request order; True when the
        parent could not fan out (its region units settled under the parent's key); False
        when something is still pending."""
        fan = region.fan.action
        spec = fan.fan_out
        assert spec is not None
        ready = rec.reason is None and all(
            (r := results.get(d)) is not None and r.status == "answered" for d in fan.dependencies
        )
        values: list[JSON] | None = None
        if ready:
            if spec.versions is not None:
                values = list(range(spec.versions))
            else:
                values, problem = _list_at(payload, results, spec.over or "")
                if values is None:
                    return await self._cannot_fan_out(
                        region, rec, payload, results, existing, extra, problem
                    )
        if values is None:
            # The parent's own dependencies decide: every unit of the region settles under
            # the parent's key (skipped upstream_failed, or with the upstream's skip reason).
            return await self._walk_members(
                region, region.steps, rec, payload, results, existing, extra
            )
        self.ctx.out.fanned_out(fan.name, rec, len(values), region.item_actions)
        name = "version" if spec.versions is not None else spec.as_name
        items = _items(rec, len(values))
        outs = await self._walk_items(
            region, items, [{**extra, name: v} for v in values], payload, results, existing
        )
        if outs is None:
            return False
        return [
            (items[i].key, {k: v for k, v in inner.items() if k in region.members})
            for i, inner in enumerate(outs)
        ]

    async def _walk_items(
        self,
        region: Region,
        items: list[ItemRecord],
        scopes: list[JSONObject],
        payload: JSONObject | None,
        results: dict[str, Settled],
        existing: Existing,
    ) -> list[dict[str, Settled]] | None:
        """Each item walks the region's steps under the region's item slots, in parallel or
        one after another (``gate: sequential``); None when one is pending."""

        async def one(i: int) -> tuple[bool, dict[str, Settled]]:
            inner = dict(results)
            if all((a, items[i].key) in existing for a in region.members):
                return await self._walk(
                    region.steps, items[i], payload, inner, existing, scopes[i]
                ), inner
            assert region.slots is not None
            async with region.slots:
                if self.ctx.control.stopping:
                    return False, inner
                ok = await self._walk(region.steps, items[i], payload, inner, existing, scopes[i])
            return ok, inner

        outs: list[tuple[bool, dict[str, Settled]]] = []
        if region.fan.action.gate == "sequential":
            for i in range(len(items)):
                ok, inner = await one(i)
                if not ok:
                    return None
                outs.append((ok, inner))
        else:
            outs = list(await asyncio.gather(*(one(i) for i in range(len(items)))))
        if not all(ok for ok, _ in outs):
            return None
        return [inner for _, inner in outs]

    async def _walk_members(
        self,
        region: Region,
        steps: list[Step],
        rec: UnitRecord,
        payload: JSONObject | None,
        results: dict[str, Settled],
        existing: Existing,
        extra: JSONObject,
    ) -> bool:
        """The region's units of a parent that did not fan out, under the parent's key."""
        inner = dict(results)
        done = await self._walk(steps, rec, payload, inner, existing, extra)
        if done:
            results.update({k: v for k, v in inner.items() if k in region.members})
        return done

    async def _cannot_fan_out(
        self,
        region: Region,
        rec: UnitRecord,
        payload: JSONObject | None,
        results: dict[str, Settled],
        existing: Existing,
        extra: JSONObject,
        problem: str,
    ) -> bool:
        """The list field is missing or not a list: the fan-out unit of the parent fails
        ``fan_out_invalid``; the rest of the region is skipped ``upstream_failed``."""
        fan = region.fan
        got = existing.get((fan.name, rec.key))
        if got is None:
            got = await self.ctx.out.settle(fan, rec, "failed", "fan_out_invalid", problem)
        inner = {**results, fan.name: got}
        done = await self._walk(region.steps[1:], rec, payload, inner, existing, extra)
        if done:
            results.update({k: v for k, v in inner.items() if k in region.members})
        return done

    async def _join(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        payload: JSONObject | None,
        results: dict[str, Settled],
        extra: JSONObject,
        items: Items | None,
    ) -> Settled | None:
        action, out = rt.action, self.ctx.out
        if items is None:
            # The parent never fanned out: its region units are in ``results`` under the
            # parent's key, and the ordinary dependency rules skip the join.
            return await run_unit(self.ctx, rt, rec, payload, results, extra)
        # The unit's decision on its record and dependencies (an input of the join is
        # missing from ``results``: judged item by item below).
        upstream = decide(
            UnitFacts(
                self.ctx.run_id,
                kind="join",
                reads_records=False,
                record_reason=rec.reason,
                record_error=rec.error,
                upstream=[(d, results.get(d)) for d in action.dependencies],
            )
        )
        if isinstance(upstream, Settle):
            return await settle(self.ctx, rt, rec, upstream)
        assert self.plan.regions is not None
        inputs = self.plan.regions.join_inputs(action.name, action.dependencies)
        joined = join_outcome(
            items, inputs, atomic=action.failure_policy == "atomic", tool=action.kind == "tool"
        )
        if isinstance(joined, Settle):
            return await settle(self.ctx, rt, rec, joined)
        fulfilled, rejected, skipped = joined
        if action.kind == "join":
            if self.ctx.control.stopping:
                return None
            return await out.settle(
                rt,
                rec,
                "answered",
                output={"fulfilled": fulfilled, "rejected": rejected, "skipped": skipped},
            )
        scope: JSONObject = {
            **extra,
            "fulfilled": fulfilled,
            "rejected": rejected,
            "skipped": skipped,
        }
        return await run_unit(self.ctx, rt, rec, payload, results, scope)


def _list_at(
    payload: JSONObject | None, results: dict[str, Settled], over: str
) -> tuple[list[JSON] | None, str]:
    root, *path = over.split(".")
    if root == "source":
        value: JSON = payload
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
