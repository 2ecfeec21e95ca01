"""Polling a batch action's batches and reading the ended ones (docs/guarantees.md, Batches).

Once every file of the action is out or has nothing to send (B4): batches from earlier
runs that no unit of this run needs any more are cancelled (B0); each open batch is
asked for its status (B5: an unreachable provider leaves that batch for the next run
and names the file; B8 cancelling and B9 unknown statuses are still running; B11
``batch_deadline`` cancels it and fails its records); ended batches are read
(engine/batch/ingest.py, B6); failed, expired and cancelled ones — as polled, or as
fetched right before reading — fail their records without being read (B7). What the
provider billed in a batch that is not read is ledgered (engine/batch/billing.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agac.engine.batch.billing import unread_rows
from agac.engine.batch.context import handle_of
from agac.engine.batch.ingest import ingest_batch
from agac.engine.batch.manual import abandoned_outcomes, unread_status
from agac.engine.transitions import READ
from agac.errors import BatchNotEnded, ProviderError
from agac.providers.base import BatchStatus, BilledWork
from agac.store.batches import BATCH_NOT_CANCELLED, OPEN_BATCH_STATES

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.batch.context import BatchContext, StepReport
    from agac.providers.base import BatchHandle
    from agac.store.values import BatchRecord

__all__ = ["Poller"]

_B7_REASON = {"failed": "batch_failed", "expired": "batch_expired", "cancelled": "batch_cancelled"}


class Poller:
    """Polls and reads the batches of one run's batch actions."""

    def __init__(self, ctx: BatchContext) -> None:
        self.ctx = ctx
        self._unreachable: dict[str, str] = {}
        """Batches whose provider could not be reached in this run (B5): not asked again."""

    async def cancel_unneeded(self, rt: ActionRuntime, *, walked: bool, adopted: set[str]) -> None:
        """B0: batches out from earlier runs whose requests this run no longer needs (its
        prompt changed, or the answers exist) are cancelled at the provider (unless they
        ended already) and given up; what the provider billed in them is ledgered. Only
        after an online pass of this invocation has recorded which batches its units
        adopted."""
        if not walked:
            return
        for b in await self.ctx.call(
            self.ctx.store.list_batches,
            self.ctx.workflow,
            tenants=self.ctx.tenants,
            open_only=True,
            action=rt.name,
        ):
            if b.run_id == self.ctx.run_id or b.key in adopted:
                continue
            if b.state in ("submitting", "unknown") or not b.provider_batch_id:
                continue
            handle = handle_of(b)
            work = await self._billed_work(rt, b)
            not_cancelled = None
            if work.status.state == "running":  # ended ones cannot be cancelled any more
                try:
                    await rt.batch_api.api.cancel_batch(handle)
                except ProviderError as exc:
                    not_cancelled = str(exc)  # nothing of it is read either way; said below
            await self._given_up(rt, b, work, not_cancelled)

    async def _given_up(
        self, rt: ActionRuntime, b: BatchRecord, work: BilledWork, not_cancelled: str | None
    ) -> None:
        """An unneeded batch is abandoned; one whose cancel the provider refused is
        ``not_cancelled`` (it may still run and be billed), with an event saying so."""
        why = f"batch {b.provider_batch_id} for {b.file}: no longer needed by the workflow (B0)"
        if not_cancelled is None:
            await self._give_up(
                rt,
                b,
                work,
                "batch_cancelled_unneeded",
                reason="batch_abandoned",
                detail=why,
                data={},
                state="abandoned",
                error="no longer needed (B0)",
            )
            return
        await self._give_up(
            rt,
            b,
            work,
            "batch_not_cancelled",
            reason="batch_abandoned",
            detail=why,
            data={"error": not_cancelled},
            state=BATCH_NOT_CANCELLED,
            error=f"no longer needed (B0); the provider did not cancel it "
            f"({not_cancelled}): it may still run and be billed",
        )

    async def poll_and_collect(self, rt: ActionRuntime, report: StepReport) -> None:
        seen: list[str] = []
        try:
            await self._poll_each(rt, report, seen)
        finally:
            self.ctx.progress.batches[rt.name] = (
                f"{len(seen)} batch{'es' if len(seen) != 1 else ''} out: {', '.join(seen)}"
                if seen
                else ""
            )

    async def _poll_each(self, rt: ActionRuntime, report: StepReport, seen: list[str]) -> None:
        for b in await self.ctx.call(
            self.ctx.store.list_batches,
            self.ctx.workflow,
            tenants=self.ctx.tenants,
            open_only=True,
            action=rt.name,
        ):
            if self.ctx.control.stopping:
                return
            if b.state in ("submitting", "unknown") or self.ctx.only_file not in (None, b.file):
                continue
            if b.key in self._unreachable:
                # B5: left for the next run, not asked again in this one.
                report.waiting.append(self._unreachable[b.key])
                continue
            handle = handle_of(b)
            try:
                status = await rt.batch_api.api.poll_batch(handle)
            except ProviderError as exc:
                self._unreach(
                    b,
                    report,
                    f"{rt.name}: cannot reach the provider for {b.file} ({handle.id}): {exc} (B5)",
                )
                continue
            await self.ctx.call(
                self.ctx.store.update_batch,
                b.key,
                raw_status=status.raw_status,
                state="running" if status.state in ("running",) else b.state,
            )
            await self.ctx.event(
                "awaiting",
                rt.name,
                batch_id=handle.id,
                file=b.file,
                status=status.raw_status,
                poll_interval=rt.action.poll_interval,
            )
            # the batches still out after this poll: one read now is not (the line would
            # show it beside the units it answered)
            out = f"{b.file} {status.raw_status} {status.completed}/{status.request_count or b.request_count}"
            if status.state == "ended":
                if await self._collect(rt, b, handle, report):
                    report.progressed = True
                else:
                    seen.append(out)
            elif status.state in _B7_REASON:
                await self._end_unread(
                    rt, b, handle, status.state, f"the provider reports {status.raw_status}"
                )
                report.progressed = True
            elif (
                b.deadline_at
                and self.ctx.control.clock.time() > b.deadline_at
                and status.state == "running"
            ):
                await self._deadline(rt, b, handle, status)
                report.progressed = True
                seen.append(out)
            else:
                what = (
                    "still cancelling (B8)"
                    if status.state == "cancelling"
                    else f"in a status agac does not know: {status.raw_status!r} (B9)"
                    if not status.known
                    else f"{status.raw_status}"
                )
                report.waiting.append(f"{rt.name}: batch {handle.id} for {b.file} is {what}")
                seen.append(out)

    async def fail_if_every_file_unread(self, rt: ActionRuntime) -> None:
        """B7: when the batch of *every* file ended failed, expired or cancelled, the action
        fails as a whole, so the next run sends every file again (R1 d)."""
        batches = await self.ctx.call(
            self.ctx.store.list_batches, self.ctx.workflow, tenants=self.ctx.tenants, action=rt.name
        )
        mine = [b for b in batches if b.collected_by == self.ctx.run_id]
        if not mine or any(b.state in OPEN_BATCH_STATES for b in batches):
            return
        files = {b.file for b in mine}
        unread = {b.file for b in mine if b.state in _B7_REASON}
        if unread == files and all(b.state in _B7_REASON for b in mine):
            await self.ctx.call(
                self.ctx.store.set_action_state,
                self.ctx.run_id,
                rt.name,
                "failed",
                f"every file's batch ended without results: {', '.join(sorted(files))}",
            )

    def _unreach(self, b: BatchRecord, report: StepReport, line: str) -> None:
        self._unreachable[b.key] = line
        report.waiting.append(line)

    async def _end_unread(
        self, rt: ActionRuntime, b: BatchRecord, handle: BatchHandle, state: str, why: str
    ) -> None:
        """B7: read nothing from it, fail its records; ledger what the provider billed in
        it (engine/batch/billing.py)."""
        reason = _B7_REASON[state]
        work = await self._billed_work(rt, b)
        await self._give_up(
            rt,
            b,
            work,
            "batch_ended_unread",
            reason=reason,
            detail=f"batch {b.provider_batch_id} for {b.file}: {why}",
            data={"state": state, "reason": reason},
            state=state,
            collected_by=self.ctx.run_id,
        )

    async def _deadline(
        self, rt: ActionRuntime, b: BatchRecord, handle: BatchHandle, status: BatchStatus
    ) -> None:
        """B11: at batch_deadline, cancel at the provider and fail the records; what it
        answered so far is ledgered as estimated (it is not read)."""
        try:
            await rt.batch_api.api.cancel_batch(handle)
        except ProviderError:
            pass  # it is failed here either way; the provider's copy is no longer read
        await self._give_up(
            rt,
            b,
            BilledWork(status, status.completed),
            "batch_deadline",
            reason="batch_deadline",
            detail=f"batch {handle.id} for {b.file} passed its batch_deadline",
            data={},
            state="cancelled",
            collected_by=self.ctx.run_id,
            error="batch_deadline",
        )

    async def _billed_work(self, rt: ActionRuntime, b: BatchRecord) -> BilledWork:
        """What the provider bills in a batch agac will not read; when its status cannot
        be read, every request at its worst case (:func:`unread_status`)."""
        try:
            return await rt.batch_api.api.billed_work(handle_of(b))
        except ProviderError as exc:
            return unread_status(b, str(exc) or type(exc).__name__)

    async def _give_up(
        self,
        rt: ActionRuntime,
        b: BatchRecord,
        work: BilledWork,
        kind: str,
        *,
        reason: str,
        detail: str,
        data: dict[str, Any],
        **batch: Any,
    ) -> None:
        """Fail the batch's waiting records ``reason``, ledger what ``work`` says the
        provider billed and write event ``kind``, in one transaction."""
        ctx = self.ctx
        now = ctx.control.clock.time()
        items = await ctx.call(lambda: list(ctx.store.iter_batch_items(b.key)))
        usage = unread_rows(b, items, work, ctx.out.prices, now)
        # B0: units that ended runs left waiting on it are told it was given up.
        rewrite = (
            await ctx.call(abandoned_outcomes, ctx.store, b, items)
            if reason == "batch_abandoned"
            else []
        )
        billed = round(sum(u.cost_usd for u in usage), 6)
        body = {
            "batch_id": b.provider_batch_id,
            "file": b.file,
            **data,
            "reason": reason,
            "units": sum(r.status == "failed" for r in rewrite),
            "billed_unread": len(usage),
            "billed_usd": billed,
            "estimated": any(u.status == "estimated" for u in usage),
        }
        events = [ctx.out.event_row(kind, rt.name, None, body, now)]
        events += [
            events[0]._replace(run_id=run)
            for run in sorted({r.run_id for r in rewrite})
            if run != ctx.run_id
        ]
        await ctx.call(
            ctx.store.end_batch_unread,
            b.key,
            reason=reason,
            detail=detail,
            tenant=b.tenant,
            usage=usage,
            events=events,
            outcomes=rewrite,
            lease=ctx.gateway.fence,
            ended_at=now,
            **batch,
        )
        if billed:
            ctx.progress.spent(rt.ledger_action, billed)

    async def _collect(
        self, rt: ActionRuntime, b: BatchRecord, handle: BatchHandle, report: StepReport
    ) -> bool:
        try:
            counts = await ingest_batch(self.ctx, rt, b, handle)
        except BatchNotEnded as exc:
            # B7: asked right before reading, the batch is no longer one to read.
            if exc.state in _B7_REASON:
                await self._end_unread(
                    rt,
                    b,
                    handle,
                    exc.state,
                    f"asked right before reading, the provider reports {exc.raw_status}",
                )
                return True
            report.waiting.append(
                f"{rt.name}: batch {handle.id} for {b.file} is "
                f"{exc.raw_status or exc.state} when asked right before "
                "reading; nothing was read, the next poll asks again"
            )
            return False
        except ProviderError as exc:
            self._unreach(
                b,
                report,
                f"{rt.name}: cannot read the results of {handle.id} for {b.file}: {exc} (B5)",
            )
            return False
        await self._answer_read_units(rt, b)
        await self.ctx.event("collected", rt.name, batch_id=handle.id, file=b.file, **counts)
        return True

    async def read_given_up(self, rt: ActionRuntime, b: BatchRecord, report: StepReport) -> None:
        """B13: read, once it has ended, a batch an earlier run cancelled to go live; every
        answer in it is billed but not used (the run that gave it up answered its records
        live). Still cancelling: left for the next run."""
        handle = handle_of(b)
        try:
            status = await rt.batch_api.api.poll_batch(handle)
            if status.state == "ended":
                counts = await ingest_batch(self.ctx, rt, b, handle, given_up=True)
                await self.ctx.event(
                    "collected", rt.name, batch_id=handle.id, file=b.file, given_up=True, **counts
                )
            elif status.state in _B7_REASON:
                why = f"cancelled to go live, the provider reports {status.raw_status}"
                await self._end_unread(rt, b, handle, status.state, why)
        except BatchNotEnded as exc:
            if exc.state in _B7_REASON:
                why = f"cancelled to go live, the provider reports {exc.raw_status}"
                await self._end_unread(rt, b, handle, exc.state, why)
        except ProviderError as exc:
            self._unreach(
                b, report, f"{rt.name}: cannot reach the provider for {b.file} ({handle.id}): {exc}"
            )

    async def _answer_read_units(self, rt: ActionRuntime, b: BatchRecord) -> None:
        """The units of an action that reads records directly, answered by what was just
        read, are written in one statement instead of walking every record again for
        them (the walk then skips their shards when nothing else is left there). An action
        with ``checks:`` is left to the walk: each answer is judged there (engine/checks.py)."""
        action = rt.action
        if (
            action.dependencies
            or action.approval is not None
            or action.checks
            or self.ctx.plan.per_item(rt.name)
        ):
            return
        await self.ctx.call(  # transitions.read_batch for each of them, in SQL
            self.ctx.store.settle_read_items,
            run_id=self.ctx.run_id,
            batch_key=b.key,
            snapshot_id=self.ctx.run.snapshot_id,
            status=READ.status,
            origin=READ.origin,
            lease=self.ctx.gateway.fence,
        )
