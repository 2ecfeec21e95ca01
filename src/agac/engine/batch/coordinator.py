"""The batch step: provider batch APIs under the rules B0-B13 (docs/guarantees.md, Batches).

How a batch action runs inside a run (see also docs/internals/batch.md):

1. The record walk walks every record as usual. A unit of a batch action that needs a
   call is *staged* (engine/batch/units.py) unless an open batch already holds its
   fingerprint (adoption, B0/B3); the record stops there.
2. :meth:`BatchCoordinator.step` then, per batch action in topological order:
   recovers intents left ``submitting``/``unknown`` by a crash and submits every input
   file whose units are all settled, staged or out (engine/batch/submission.py); once
   every file of the action is out or has nothing to send (B4), polls each open batch
   and reads the ended ones (engine/batch/polling.py, engine/batch/ingest.py). A hybrid
   action whose instant to go live has come is switched instead (B13,
   engine/batch/hybrid.py): its batches are cancelled once and polled until they end.
3. Whatever was read becomes answers (by fingerprint) and item results; the next walk
   settles the units from them and stages retry items (B6). The run repeats walks and
   steps until no step makes progress, then pauses (exit 75) while batches are out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agac.engine.batch.context import StepReport
from agac.engine.batch.submission import open_reservations

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.batch.context import BatchContext
    from agac.engine.batch.hybrid import Hybrid
    from agac.engine.batch.polling import Poller
    from agac.engine.batch.submission import Submitter
    from agac.engine.batch.units import BatchUnits
    from agac.engine.limits.budget import Reservation

__all__ = ["BatchCoordinator", "StepReport"]


class BatchCoordinator:
    """Submits, adopts, polls and reads the batches of one run's batch actions."""

    def __init__(
        self,
        ctx: BatchContext,
        batch_rts: list[ActionRuntime],
        submitter: Submitter,
        poller: Poller,
        units: BatchUnits,
        hybrid: Hybrid,
    ) -> None:
        self.ctx = ctx
        self.batch_rts = batch_rts
        self.submitter = submitter
        self.poller = poller
        self.units = units
        self.hybrid = hybrid

    @property
    def refused_actions(self) -> set[str]:
        return self.ctx.refused_actions

    async def step(self, *, walked: bool) -> StepReport:
        """One step over every batch action; ``walked``: a full walk of this invocation has
        recorded which batches its units adopted (B0 may cancel the others)."""
        ctx = self.ctx
        report = StepReport()
        if ctx.budget is not None:
            # Nothing is in flight between passes: what was spent and what is still out
            # are read again from the store (batches read since are settled).
            held = await ctx.call(self.open_reservations)
            await ctx.call(ctx.budget.sync, ctx.store, ctx.run, held)
        intervals = [rt.action.poll_interval or 300.0 for rt in self.batch_rts]
        report.poll_interval = min(intervals) if intervals else 300.0
        for rt in self.batch_rts:
            if ctx.control.stopping:
                break  # Ctrl-C: nothing new is sent, polled or read; the next run goes on
            await self.submitter.recover_intents(rt, report)
            if ctx.control.live_due(rt.name):
                await self.hybrid.switch(rt, report)
            if ctx.control.is_live(rt.name):
                # B13: nothing more is batched; its batches are cancelled once and read
                await self.hybrid.cancel_out(rt, report)
                await self.poller.poll_and_collect(rt, report)
                continue
            all_sent = await self.submitter.submit_ready_files(rt, report)
            if rt.name in ctx.refused_actions:
                continue  # B2: the action fails; the batches of its other files stay out (B0)
            if not all_sent:
                report.waiting.append(await self._held(rt))
                continue
            await self.poller.cancel_unneeded(rt, walked=walked, adopted=self.units.adopted)
            await self.poller.poll_and_collect(rt, report)
            if rt.follows is None:  # a follow-up's failed batch fails only its checks
                await self.poller.fail_if_every_file_unread(rt)
        return report

    async def close_settled(self) -> None:
        """Mark collected the batches of the workflow whose every item was read by a run
        killed before it could say so: no run would read them again, and taken as out
        they would hold the run's end and refuse ``agac retry``."""
        ctx = self.ctx
        closed = await ctx.call(
            ctx.store.close_settled_batches,
            ctx.workflow,
            tenant=ctx.tenant,
            run_id=ctx.run_id,
            at=ctx.control.clock.time(),
        )
        for b in closed:
            await ctx.event(
                "collected", b.action, batch_id=b.provider_batch_id, file=b.file, settled=True
            )

    async def reconcile_given_up(self) -> None:
        """B13: the batches an earlier run cancelled to go live, and ended without once
        every unit had its answer, are read now when they have ended (their answers
        billed but not used, ``hybrid_overlap``) or marked unread (B7, what they billed
        ledgered ``unread``); one still cancelling is asked again by the next run
        (decision 0097). The batches of an action this run switched live are cancelled
        first, once, if a crash left any not cancelled."""
        report = StepReport()
        for rt in self.batch_rts:
            if self.ctx.control.is_live(rt.name):  # a crash may have cut its cancels short
                await self.hybrid.cancel_out(rt, report)
                continue
            for b in await self.hybrid.given_up(rt):
                if self.ctx.control.stopping:
                    return
                await self.hybrid.cancel_once(rt, b, report)
                await self.poller.read_given_up(rt, b, report)

    async def _held(self, rt: ActionRuntime) -> str:
        """B4: the action collects nothing until every file is out; which files are not,
        and the batches upstream of them that they wait on."""
        ctx = self.ctx
        files = self.submitter.unsent.get(rt.name, [])
        upstream: dict[str, list[str]] = {}
        for b in await ctx.call(
            ctx.store.list_batches, ctx.workflow, tenants=ctx.tenants, open_only=True
        ):
            if b.action in rt.action.ancestors and b.file in files:
                upstream.setdefault(b.file, []).append(
                    f"{b.action}'s batch {b.provider_batch_id or b.key}"
                )
        named = "; ".join(
            f"{f} waits on {', '.join(sorted(upstream[f]))}"
            if f in upstream
            else f"{f}: its records have not all reached {rt.name}"
            for f in files
        )
        return f"{rt.name}: waiting until every input file can be sent (B4)" + (
            f": {named}" if named else ""
        )

    def open_reservations(
        self, known: dict[str, Reservation] | None = None
    ) -> dict[str, Reservation]:
        """Worst cases of the batches this run has out (R5); in the store thread."""
        assert self.ctx.budget is not None
        return open_reservations(
            self.ctx.store,
            self.ctx.budget,
            self.ctx.run_id,
            self.ctx.workflow,
            [rt.action for rt in self.batch_rts],
            known,
            tenant=self.ctx.tenant,
        )
