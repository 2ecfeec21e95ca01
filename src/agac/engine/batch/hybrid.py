"""The deadline-aware hybrid (B13, docs/guarantees.md): a batch action with ``hybrid:
{live_after}`` in a run with a ``deadline`` stops waiting on its batches at the instant
fixed at admission (``RunSettings.live_at``) and sends what has no answer live.

The switch, in steps that each survive a crash (S1):

1. **Recorded.** In one transaction: the action's state in the run becomes ``live``
   (:data:`LIVE_STATE`), every open batch of the action gets the intent to cancel it
   (``meta.hybrid = "cancelling"``) and the event ``hybrid_switched`` names the batches
   and how many records go live. From then on the action's units decide "send online"
   (engine/decision.py) and nothing more of it is batched.
2. **Cancelled once.** Each batch with the intent (or found out later, a recovered
   intent) is asked its status first and cancelled only while the provider says it is
   still running, then marked ``meta.hybrid = "cancel_sent"``; a rerun after a crash
   between the two finds the batch cancelling or ended and does not cancel it again.
3. **Read or marked.** The cancelled batches are polled and, once ended, read (B8: an
   Anthropic batch cancelled while running returns a result per request) or marked
   without reading (B7). An answer for a unit that was answered live meanwhile is
   stored but not used: its ledger row has origin :data:`OVERLAP_ORIGIN`
   (engine/batch/ingest.py).

The live calls themselves are the ordinary online path (engine/walk/calls.py), under the
action's ``max_concurrency`` and rate limits; the run does not wait for a batch being
cancelled, neither before going live nor after: it ends once every unit has its outcome,
and the next run of the workflow reads or marks what is left (:meth:`Hybrid.given_up`,
decision 0097), so what the provider billed in them is counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agac.engine.batch.context import handle_of
from agac.engine.crashpoints import maybe_crash
from agac.errors import ProviderError
from agac.jsontext import dumps
from agac.store.batches import staged_key

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.batch.context import BatchContext, StepReport
    from agac.jsontext import JSON
    from agac.store.values import BatchRecord

__all__ = ["CANCEL_DONE", "CANCEL_INTENT", "LIVE_STATE", "OVERLAP_ORIGIN", "Hybrid"]

LIVE_STATE = "live"
"""The ``run_actions`` state of a batch action that switched live in the run."""
OVERLAP_ORIGIN = "hybrid_overlap"
"""The ledger origin of a batch answer to a unit already answered live: billed, not used."""
CANCEL_INTENT = "cancelling"
"""``meta.hybrid`` of a batch agac means to cancel (the intent, recorded first)."""
CANCEL_DONE = "cancel_sent"
"""``meta.hybrid`` of a batch whose cancel the provider took (or that had stopped running)."""


class Hybrid:
    """Switches a run's hybrid batch actions live and cancels their batches, once."""

    def __init__(self, ctx: BatchContext) -> None:
        self.ctx = ctx

    async def switch(self, rt: ActionRuntime, report: StepReport) -> None:
        """Step 1: record that ``rt`` goes live, with the intent to cancel each of its open
        batches, before anything is cancelled; the run walks again to send live."""
        ctx = self.ctx
        out = [b for b in await self._open(rt) if b.state not in ("submitting", "unknown")]
        live = await ctx.call(self._waiting_units, rt, out)
        ids: list[JSON] = [b.provider_batch_id or b.key for b in out]
        at = ctx.control.live_at.get(rt.name)
        why = f"switched live at live_after (B13): {len(live)} records sent live"
        files: list[JSON] = [*sorted({b.file for b in out})]
        body: dict[str, JSON] = {"batches": ids, "files": files, "live": len(live), "live_at": at}
        event = ctx.out.event_row("hybrid_switched", rt.name, None, body, ctx.control.clock.time())
        await ctx.call(
            ctx.store.switch_live,
            ctx.run_id,
            rt.name,
            state=LIVE_STATE,
            why=why,
            batches=[(b.key, {**b.meta, "hybrid": CANCEL_INTENT}) for b in out],
            events=[event],
            lease=ctx.gateway.fence,
        )
        ctx.control.go_live(rt.name)
        maybe_crash("hybrid_switched")
        report.progressed = True

    async def cancel_out(self, rt: ActionRuntime, report: StepReport) -> None:
        """Step 2: cancel, once, every open batch of the live action that has not been
        cancelled yet. A batch the provider no longer reports running (a crash came after
        the cancel, or it ended) is only marked."""
        for b in await self._open(rt):
            if self.ctx.control.stopping:
                return
            await self.cancel_once(rt, b, report)

    async def cancel_once(self, rt: ActionRuntime, b: BatchRecord, report: StepReport) -> None:
        """Cancel ``b`` unless its cancel was sent already (or it is not at the provider)."""
        ctx = self.ctx
        if (
            b.state in ("submitting", "unknown")
            or not b.provider_batch_id
            or b.meta.get("hybrid") == CANCEL_DONE
        ):
            return
        meta = {**b.meta, "hybrid": CANCEL_INTENT}
        if b.meta.get("hybrid") != CANCEL_INTENT:  # out since the switch: its intent first
            await ctx.call(ctx.store.update_batch, b.key, meta=dumps(meta))
        handle = handle_of(b)
        try:
            status = await rt.batch_api.api.poll_batch(handle)
            if status.state == "running":
                await rt.batch_api.api.cancel_batch(handle)
                maybe_crash("hybrid_cancelled")
        except ProviderError as exc:
            report.waiting.append(
                f"{rt.name}: could not cancel batch {handle.id} for "
                f"{b.file} to go live: {exc}; the next poll asks again (B13)"
            )
            return
        await ctx.call(ctx.store.update_batch, b.key, meta=dumps({**meta, "hybrid": CANCEL_DONE}))

    async def given_up(self, rt: ActionRuntime) -> list[BatchRecord]:
        """The open batches of ``rt`` that an earlier run cancelled to go live and ended
        without (this run does not switch ``rt`` itself, or has not yet)."""
        if self.ctx.control.is_live(rt.name):
            return []
        return [
            b for b in await self._open(rt) if b.meta.get("hybrid") in (CANCEL_INTENT, CANCEL_DONE)
        ]

    async def _open(self, rt: ActionRuntime) -> list[BatchRecord]:
        ctx = self.ctx
        return [
            b
            for b in await ctx.call(
                ctx.store.list_batches,
                ctx.workflow,
                tenants=ctx.tenants,
                open_only=True,
                action=rt.name,
            )
            if ctx.only_file in (None, b.file)
        ]

    def _waiting_units(self, rt: ActionRuntime, out: list[BatchRecord]) -> set[str]:
        """The units of ``rt`` still waiting on a batch or staged for one (they go live);
        in the store thread."""
        store, ctx = self.ctx.store, self.ctx
        keys = [b.key for b in out] + [
            staged_key(ctx.run_id, rt.name, f["file"]) for f in ctx.files
        ]
        return {
            i.unit_key for key in keys for i in store.iter_batch_items(key) if i.status == "pending"
        }
