"""A batch action's unit inside the record walk (DESIGN §6): the unit has no stored answer,
so it is settled from the batch items this run read, left pending while a batch that
is out holds its fingerprint (adopted, B0/B3), or *staged* — a ``batch_items`` row
under ``staged:<run>:<action>:<file>`` that the batch step submits.

The walk reads the items of a shard's units ahead (:meth:`BatchUnits.prefetch`), so a
unit waiting on, or read from, this run's own item settles without rendering.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agac.store.batches import OPEN_BATCH_STATES, staged_by, staged_key
from agac.store.rows import StagedItem

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.limits.budget import BudgetGuard
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.outcomes.writer import OutcomeWriter
    from agac.engine.ports import ShardMemory
    from agac.engine.values import RunControl, Settled, UnitRecord
    from agac.engine.walk.steps import StepPlan
    from agac.store.repository import Store
    from agac.store.values import BatchItem, Origin

__all__ = ["BatchUnits"]


class BatchUnits:
    """The batch side of one run's units (implements :class:`agac.engine.ports.BatchUnits`)."""

    def __init__(self, *, run_id: str, workflow: str, tenant: str, batch_rts: list[ActionRuntime],
                 plan: StepPlan, store: Store, gateway: StoreGateway, out: OutcomeWriter,
                 control: RunControl, budget: BudgetGuard | None) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.tenant = tenant
        """The run's tenant: it adopts only its own tenant's batches (B0, T2)."""
        self.batch_rts = batch_rts
        self.plan = plan
        self.store = store
        self.gateway = gateway
        self.out = out
        self.control = control
        self.budget = budget
        self.items: dict[tuple[str, str], list[BatchItem]] = {}
        """(action, unit key) -> its batch items (any batch, staged included), per shard."""
        self.answers: dict[str, str] = {}
        """Answers of items this run read, prefetched by fingerprint."""
        self.adopted: set[str] = set()
        """Keys of batches out that units of this run still wait on (B0: keep them)."""

    # -- per shard ----------------------------------------------------------------------------

    async def prefetch(self, keys: list[str]) -> None:
        for rt in self.batch_rts:
            rows = await self.gateway.call(self.store.unit_items, self.workflow, rt.name, keys,
                                           tenant=self.tenant, items=self.plan.per_item(rt.name))
            for row in rows:
                self.items.setdefault((rt.name, row.unit_key), []).append(row)
        fps = [i.fingerprint for items in self.items.values() for i in items
               if i.status == "succeeded" and i.collected_by == self.run_id]
        if fps:
            self.answers.update(await self.gateway.call(self.store.get_answers, fps,
                                                        tenant=self.tenant))

    def forget(self, keys: list[str]) -> None:
        for rt in self.batch_rts:
            for k in keys:
                self.items.pop((rt.name, k), None)
        if self.plan.regions is not None and self.items:
            under = tuple(k + "/" for k in keys)
            for unit in [unit for unit in self.items if unit[1].startswith(under)]:
                del self.items[unit]

    async def settle_ahead(self, rt: ActionRuntime, records: Sequence[UnitRecord],
                           existing: dict[tuple[str, str], Settled], memory: ShardMemory) -> set[str]:
        """A shard's units of ``rt`` when it is the first step of every record and reads
        the record alone (no guard, no approval): those waiting on this run's own items
        are pending, those with nothing stored or sent yet are staged in one group — with
        no walk per record. The keys of the records whose walk stops there; everything
        else (answers to settle, failures read, adoptions) is left to the walk."""
        if not self._ahead(rt):
            return set()
        waiting: set[str] = set()
        rows: list[StagedItem] = []
        for rec in records:
            key = rec.key
            if rec.reason or (rt.name, key) in existing:
                continue
            own = self.own_item(rt, key)
            if own is not None:
                if own.status == "pending" and self.own_item_decides(own):
                    waiting.add(key)
                continue
            ahead = memory.prefetched.get((rt.name, key))
            if ahead is None or ahead.stored is not None or (rt.name, key) in self.items:
                continue
            fp = ahead.fingerprint
            if memory.carried_failure(rt.name, key, fp) is not None:
                continue
            del memory.prefetched[(rt.name, key)]
            rows.append(self._staged(rt, rec, ahead.request_json, fp, 1))
            waiting.add(key)
        if rows:
            self.out.stage(rows)
        return waiting

    def _ahead(self, rt: ActionRuntime) -> bool:
        action = rt.action
        return (rt in self.batch_rts and not action.dependencies and rt.guard is None
                and action.approval is None and self.control.action_failed(rt.name) is None
                and not self.plan.per_item(rt.name) and not self.control.stopping
                and not self.control.deadline_passed()
                and not (self.budget is not None and self.budget.exhausted))

    def _staged(self, rt: ActionRuntime, rec: UnitRecord, request_json: str, fp: str,
                attempt: int) -> StagedItem:
        return StagedItem(staged_key(self.run_id, rt.name, rec.file), f"{rec.custom}a{attempt}",
                          self.workflow, rt.name, rec.key, rec.file, fp, attempt, request_json)

    # -- one unit -----------------------------------------------------------------------------

    def _matching(self, rt: ActionRuntime, key: str, fp: str) -> list[BatchItem]:
        return sorted((i for i in self.items.get((rt.name, key), []) if i.fingerprint == fp),
                      key=lambda i: i.attempt)

    def own_item(self, rt: ActionRuntime, key: str) -> BatchItem | None:
        """The latest batch item this run staged or sent for the unit, if any."""
        own = [i for i in self.items.get((rt.name, key), [])
               if i.batch_run == self.run_id or staged_by(i.batch_key, self.run_id)]
        return max(own, key=lambda i: i.attempt) if own else None

    def own_item_decides(self, item: BatchItem) -> bool:
        """Whether this run's own item settles the unit without rendering: it waits (staged
        here or pending in an open batch) or it was read by this run. Anything else (a
        retry, a batch resolved not submitted) goes the normal way."""
        if item.status == "pending":
            return item.batch_state is None or item.batch_state in OPEN_BATCH_STATES
        return item.status in ("succeeded", "failed") and item.collected_by == self.run_id

    async def settle_from_own_item(self, rt: ActionRuntime, rec: UnitRecord,
                                   item: BatchItem) -> Settled | None:
        """Pending while the item waits; answered or failed once this run read it."""
        if item.status == "pending":
            return None
        attempts = sum(1 for i in self.items.get((rt.name, rec.key), [])
                       if i.batch_run == self.run_id)
        if item.status == "failed":
            return await self.out.settle(rt, rec, "failed", item.reason, item.detail,
                                         origin="call", fingerprint=item.fingerprint,
                                         attempts=attempts)
        stored = self.answers.pop(item.fingerprint, None)
        if stored is None:
            stored = await self.gateway.lookup_answer(item.fingerprint)
        if stored is None:
            return None  # not readable here; the unit is asked again through the normal path
        return await self.out.settle(rt, rec, "answered", output=json.loads(stored),
                                     origin="call", fingerprint=item.fingerprint,
                                     output_json=stored, attempts=attempts)

    def answer_is_ours(self, rt: ActionRuntime, rec: UnitRecord, fp: str) -> bool:
        return any(i.status == "succeeded" and i.collected_by == self.run_id
                   for i in self._matching(rt, rec.key, fp))

    def origin(self, rt: ActionRuntime, rec: UnitRecord, fp: str) -> tuple[Origin, int]:
        """('call', attempts) when this run paid for the batch answer, else ('reused', 0)."""
        mine = [i for i in self._matching(rt, rec.key, fp) if i.batch_run == self.run_id]
        if any(i.status == "succeeded" for i in mine):
            return "call", len(mine)
        return "reused", 0

    async def unit(self, rt: ActionRuntime, rec: UnitRecord, request_json: str,
                   fp: str) -> Settled | None:
        """A batch action's unit that has no answer: settle it from its items read in this
        run, or leave it pending in a batch that is out (adopted, B0), or stage it."""
        items = self._matching(rt, rec.key, fp)
        if any(staged_by(i.batch_key, self.run_id) for i in items):
            return None
        out = [i for i in items if i.batch_state in OPEN_BATCH_STATES and i.status == "pending"]
        if out:
            self.adopted.update(i.batch_key for i in out)  # B0: still needed
            return None
        read_here = [i for i in items if i.collected_by == self.run_id]
        if read_here:
            last = read_here[-1]
            if last.status == "failed":
                return await self.out.settle(rt, rec, "failed", last.reason, last.detail,
                                             origin="call", fingerprint=fp,
                                             attempts=len(read_here))
        if self.control.deadline_passed():
            return await self.out.settle(rt, rec, "skipped", "deadline",
                                         "never sent: the run's deadline passed")
        if self.budget is not None and self.budget.exhausted:
            return await self.out.settle(rt, rec, "skipped", "budget_exhausted",
                                         "never sent: the budget has no room for its worst case")
        self.out.stage([self._staged(rt, rec, request_json, fp, len(read_here) + 1)])
        return None
