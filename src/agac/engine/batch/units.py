"""A batch action's units inside the record walk (docs/guarantees.md, Batches): the facts the unit's
decision reads (engine/decision.py: the unit's batch items, the answers of items this run
read) and what it does with them — *stage* a unit (a ``batch_items`` row under
``staged:<run>:<action>:<file>`` that the batch step submits) or adopt the batches out
that hold its request (B0/B3).

The walk reads the items of a shard's units ahead (:meth:`BatchUnits.prefetch`), so a
unit waiting on, or read from, this run's own item is decided without rendering, and a
shard's first step is decided for all its records at once (:meth:`BatchUnits.settle_ahead`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from agac.engine.batch.rounds import Rounds
from agac.engine.decision import (
    NOT_YET,
    Adopt,
    Decision,
    Pending,
    Stage,
    UnitFacts,
    decide,
    first_seen,
)
from agac.store.batches import staged_key
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
    from agac.store.values import BatchItem

__all__ = ["BatchUnits"]


class BatchUnits:
    """The batch side of one run's units (implements :class:`agac.engine.ports.BatchUnits`)."""

    def __init__(
        self,
        *,
        run_id: str,
        workflow: str,
        tenant: str,
        batch_rts: list[ActionRuntime],
        plan: StepPlan,
        store: Store,
        gateway: StoreGateway,
        out: OutcomeWriter,
        control: RunControl,
        budget: BudgetGuard | None,
        rounds: Rounds | None = None,
    ) -> None:
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
        self.rounds = rounds if rounds is not None else Rounds()
        """The follow-up rounds of its actions: judges and repairs (engine/batch/rounds.py)."""
        self.items: dict[tuple[str, str], list[BatchItem]] = {}
        """(action, unit key) -> its batch items (any batch, staged included), per shard."""
        self.answers: dict[str, str] = {}
        """Answers of items this run read, prefetched by fingerprint."""
        self.adopted: set[str] = set()
        """Keys of batches out that units of this run still wait on (B0: keep them)."""

    # -- per shard ----------------------------------------------------------------------------

    async def prefetch(self, keys: list[str]) -> None:
        for rt in self.batch_rts:
            rows = await self.gateway.call(
                self.store.unit_items,
                self.workflow,
                rt.name,
                keys,
                tenant=self.tenant,
                items=self.plan.per_item(rt.name),
            )
            for row in rows:
                self.items.setdefault((rt.name, row.unit_key), []).append(row)
        fps = [
            i.fingerprint
            for items in self.items.values()
            for i in items
            if i.status == "succeeded" and i.collected_by == self.run_id
        ]
        if fps:
            self.answers.update(
                await self.gateway.call(self.store.get_answers, fps, tenant=self.tenant)
            )

    def forget(self, keys: list[str]) -> None:
        for rt in self.batch_rts:
            for k in keys:
                self.items.pop((rt.name, k), None)
        if self.plan.regions is not None and self.items:
            under = tuple(k + "/" for k in keys)
            for unit in [unit for unit in self.items if unit[1].startswith(under)]:
                del self.items[unit]

    async def settle_ahead(
        self,
        rt: ActionRuntime,
        records: Sequence[UnitRecord],
        existing: dict[tuple[str, str], Settled],
        memory: ShardMemory,
    ) -> set[str]:
        """A shard's units of ``rt`` when it is the first step of every record and reads
        the record alone (no guard, no approval), decided at once with what the walk
        prepared (their requests rendered ahead, their items): those the decision leaves
        waiting on a batch are pending, those it stages are staged in one group, those it
        adopts are adopted — with no walk per record. The keys of the records whose walk
        stops there; every other decision (an outcome to write) is left to the walk."""
        action = rt.action
        if (
            rt not in self.batch_rts
            or action.dependencies
            or rt.guard is not None
            or action.approval is not None
            or self.plan.per_item(rt.name)
        ):
            return set()
        control, budget = self.control, self.budget
        stopping, failed = control.stopping, control.action_failed(rt.name)
        deadline = control.deadline_passed()
        live = control.is_live(rt.name)
        exhausted = budget is not None and budget.exhausted
        waiting: set[str] = set()
        rows: list[StagedItem] = []
        loops = bool(rt.tool_defs)  # a loop's first stage or adoption may carry an earlier run's
        # live or not -> the decision of the units the store knows nothing of yet
        # (first_seen): decided once, taken for the others
        alike: dict[bool, Decision] = {}
        for rec in records:
            key = rec.key
            if (rt.name, key) in existing:
                continue
            ahead = memory.prefetched.get((rt.name, key))
            facts = UnitFacts(
                self.run_id,
                record_reason=rec.reason,
                record_error=rec.error,
                stopping=stopping,
                action_failed=failed,
                batch=True,
                items=self.items.get((rt.name, key), ()),
                carried=memory.carried.get((rt.name, key)) if memory.carried else None,
                fingerprint=ahead.fingerprint if ahead is not None else NOT_YET,
                stored=ahead.stored if ahead is not None else NOT_YET,
                deadline_passed=deadline,
                budget_exhausted=exhausted,
                live=live or control.is_live(rt.name, key),
            )
            seen = first_seen(facts)
            d = alike.get(facts.live) if seen else None
            if d is None:
                d = decide(facts)
                if seen:
                    alike[facts.live] = d
            if isinstance(d, Pending) and d.why == "batch":
                waiting.add(key)
            elif isinstance(d, Adopt) and not loops:
                self.adopt(d.batches)
                waiting.add(key)
            elif isinstance(d, Stage) and ahead is not None and not d.continues and not loops:
                del memory.prefetched[(rt.name, key)]
                rows.append(self._staged(rt, rec, ahead.request_json, ahead.fingerprint, d.attempt))
                waiting.add(key)
        if rows:
            self.out.stage(rows)
        return waiting

    def _staged(
        self, rt: ActionRuntime, rec: UnitRecord, request_json: str, fp: str, attempt: int
    ) -> StagedItem:
        return StagedItem(
            staged_key(self.run_id, rt.name, rec.file),
            f"{rec.custom}a{attempt}",
            self.workflow,
            rt.name,
            rec.key,
            rec.file,
            fp,
            attempt,
            request_json,
        )

    # -- one unit -----------------------------------------------------------------------------

    def items_of(self, rt: ActionRuntime, key: str) -> Sequence[BatchItem]:
        """Every batch item of the unit (any batch, staged included), as prefetched."""
        return self.items.get((rt.name, key), ())

    async def own_answer(self, fingerprint: str) -> str | None:
        """The answer of an item this run read (prefetched with the shard, else looked up)."""
        stored = self.answers.pop(fingerprint, None)
        if stored is None:
            stored = await self.gateway.lookup_answer(fingerprint)
        return stored

    def adopt(self, batches: Iterable[str]) -> None:
        """B0: units of this run still wait on these batches out (they are not cancelled)."""
        self.adopted.update(batches)

    def stage(
        self, rt: ActionRuntime, rec: UnitRecord, request_json: str, fp: str, attempt: int
    ) -> None:
        """Stage the unit for the action's next batch (``staged:<run>:<action>:<file>``)."""
        self.out.stage([self._staged(rt, rec, request_json, fp, attempt)])

    def judge_round(self, action: str, check: str) -> ActionRuntime | None:
        return self.rounds.judge(action, check)

    def repair_round(self, action: str) -> ActionRuntime | None:
        return self.rounds.repair(action)
