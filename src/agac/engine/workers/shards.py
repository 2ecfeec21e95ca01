"""A worker advancing one claimed shard with the same assembly ``agac run`` uses
(engine/lifecycle/assembly.py), fenced on the shard's lease (S3).

- **An online shard** (≤ 1,000 records of one file) is walked once; its lease is renewed
  every ``ttl / 3`` meanwhile. Done when every unit settled; otherwise handed back to
  be looked at again when woken (its units wait on batches, a person or an effect).
- **A batch shard** (action, file) runs one batch step for that file: recover its
  intents, submit its staged items, poll and read its batches, with every store call of
  the step renewing the lease first (a worker that lost the shard stops there).

What to do with the shard afterwards (done, handed back when, a run to end) is the
:class:`ShardOutcome` the worker loop acts on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agac.engine.batch.rounds import follow_up_actions
from agac.engine.batch.submission import open_reservations
from agac.engine.lifecycle.assembly import RunParts, ShardSetup, assemble_run
from agac.engine.lifecycle.leases import heartbeat
from agac.engine.limits.budget import BudgetGuard, Reservation, RunLedger
from agac.engine.outcomes.gateway import Lease, StoreGateway
from agac.engine.outcomes.marks import account_lost_calls
from agac.engine.outcomes.writer import Progress
from agac.engine.workers.rates import SharedSpending, StoreRateLimiter
from agac.errors import LeaseLost, StoreError
from agac.providers.base import Provider, batch_api
from agac.store.claims import IDLE

if TYPE_CHECKING:
    from agac.config.model import Action, Workflow
    from agac.config.project import Project
    from agac.engine.batch.context import Pacer
    from agac.engine.values import Halt, RunControl
    from agac.engine.walk.shards import PriorRun
    from agac.engine.workers.rates import WorkerSlots
    from agac.store.claims import Claim
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["RunContext", "ShardOutcome", "advance_batch", "advance_online"]


@dataclass(frozen=True)
class RunContext:
    """What a worker keeps of one open run between its shards."""

    run: RunRecord
    workflow: Workflow
    providers: Mapping[str, Provider]
    files: list[dict[str, Any]]
    prior: PriorRun
    slots: dict[str, WorkerSlots]
    limiters: dict[str, StoreRateLimiter]


@dataclass(frozen=True)
class ShardOutcome:
    """``done``: release the shard done; ``back``: hand it back, ready at ``ready_at``;
    ``halt``: hand it back and end the run ``halt`` (a person's decision ends it);
    ``lost``: the lease was taken over. ``wake``: the kind of the file's shards to wake."""

    kind: Literal["done", "back", "halt", "lost"]
    ready_at: float = 0.0
    halt: Halt | None = None
    wake: Literal["online", "batch"] | None = None
    log: list[str] = field(default_factory=list)


def _assemble(
    project: Project, store: Store, ctx: RunContext, claim: Claim, gateway: StoreGateway
) -> RunParts:
    """The shard's parts (in a thread: the assembly reads the store)."""
    run = ctx.run
    renew = _fenced(store, gateway, claim)
    if claim.kind == "online":
        # S1/§8: calls a previous holder of this shard may have sent and never settled
        account_lost_calls(
            store, run, shards=[claim.shard], lease=(claim.lease_name, claim.token, claim.ttl)
        )

    def pacer(provider: str) -> Pacer | None:
        config = (dict(project.config.providers) if project.config else {}).get(provider)
        per_min = config.batch_submissions_per_minute if config else None
        if not per_min:
            return None
        return StoreRateLimiter(store, f"batch_submissions:{provider}", float(per_min), None)

    ledger = None
    if run.settings.budget is not None and claim.kind == "online":
        # Other workers spend from the same budget: read the run's ledger (and the
        # batches out) before each reservation (R5; see
        # docs/decisions/0051-worker-budgets-through-the-ledger.md).
        batch = [
            b
            for a in ctx.workflow.actions
            if a.kind == "llm"
            and a.run_mode == "batch"
            and batch_api(ctx.providers.get(a.provider or "")) is not None
            for b in (a, *_follow_ups(a))
        ]

        def reservations(
            guard: BudgetGuard, known: dict[str, Reservation]
        ) -> dict[str, Reservation]:
            return open_reservations(
                store, guard, run.id, run.workflow, batch, known, tenant=run.tenant
            )

        ledger = SharedSpending(
            RunLedger(store, run), store, run.id, reservations if batch else None
        ).read
    setup = ShardSetup(
        ranges=[(claim.lo, claim.hi)] if claim.kind == "online" else [],
        slots=ctx.slots,
        limiters=ctx.limiters,
        batch_action=claim.action if claim.kind == "batch" else None,
        batch_file=claim.file if claim.kind == "batch" else None,
        call=renew if claim.kind == "batch" else None,
        pacer=pacer,
        ledger=ledger,
    )
    progress = Progress([a.name for a in ctx.workflow.actions], 0)
    return assemble_run(
        project,
        store,
        run,
        ctx.workflow,
        gateway=gateway,
        providers=ctx.providers,
        progress=progress,
        prior=ctx.prior,
        files=ctx.files,
        setup=setup,
    )


def _follow_ups(action: Action) -> list[Action]:
    """The judges' and repairs' rounds of a batch action (engine/batch/rounds.py), whose
    batches out the budget holds too."""
    judges, repair = follow_up_actions(action)
    return [a for (a, _), _ in judges] + ([repair] if repair is not None else [])


def _fenced(store: Store, gateway: StoreGateway, claim: Claim) -> Callable[..., Any]:
    async def call(fn: Any, *args: Any, **kw: Any) -> Any:
        # Fence before every store call of the step: a worker that lost the shard stops here.
        await gateway.call(store.renew_lease, claim.lease_name, claim.token, claim.ttl)
        return await gateway.call(fn, *args, **kw)

    return call


async def advance_online(
    project: Project,
    store: Store,
    ctx: RunContext,
    claim: Claim,
    *,
    worker: str,
    started: Callable[[RunControl], None],
    ended: Callable[[RunControl], None],
) -> ShardOutcome:
    """Walk one online shard. ``started``/``ended`` let the worker stop it (SIGTERM)."""
    gateway = StoreGateway(
        store, Lease(claim.lease_name, claim.token, claim.ttl), tenant=ctx.run.tenant
    )
    gateway.start()
    parts = await asyncio.to_thread(_assemble, project, store, ctx, claim, gateway)
    started(parts.control)
    complete, log = False, []
    try:
        await parts.out.event(
            "shard_claimed", worker=worker, shard=claim.shard, pid=_pid(), host=_host()
        )
        # a cache another shard of the run recorded is reused (one per run, but two shards
        # starting at once may each create one)
        await parts.caches.prepare(parts.runtimes)
        beat = asyncio.get_running_loop().create_task(
            heartbeat(gateway, store, ctx.run.id, parts.control, claim.ttl / 3)
        )
        try:
            complete = await parts.walk.walk()
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, LeaseLost, StoreError):
                await beat
        for name, why in parts.control.failed_actions.items():
            await gateway.call(store.set_action_state, ctx.run.id, name, "failed", why)
        await gateway.flush()
        # every call this shard sent has settled: what its marks still list was not sent
        await gateway.call(store.clear_marks, ctx.run.id, [claim.shard], gateway.fence)
    except StoreError as exc:
        parts.control.stop()
        complete = False
        if not isinstance(exc, LeaseLost) and not isinstance(gateway.broken, LeaseLost):
            log.append(f"shard {claim.shard} of run {claim.run_id}: {exc.message}")
    finally:
        ended(parts.control)
        await gateway.close()
    halt = parts.approvals.halt if parts.approvals is not None else None
    if complete and halt is None:
        return ShardOutcome("done", log=log)
    if halt is not None:  # a decision ends the run (approval on_reject: fail_run, ...)
        return ShardOutcome("halt", halt=halt, log=log)
    if parts.control.stopping:
        return ShardOutcome("back", log=log)
    # Units wait on batches, a person or an effect: look again when woken.
    return ShardOutcome(
        "back",
        ready_at=store.clock.time() + IDLE,
        log=log,
        wake="batch" if parts.batch is not None else None,
    )


async def advance_batch(
    project: Project, store: Store, ctx: RunContext, claim: Claim, *, worker: str
) -> ShardOutcome:
    """One batch step for the shard's (action, file)."""
    gateway = StoreGateway(
        store, Lease(claim.lease_name, claim.token, claim.ttl), tenant=ctx.run.tenant
    )
    gateway.start()
    try:
        parts = await asyncio.to_thread(_assemble, project, store, ctx, claim, gateway)
        batch = parts.batch
        if batch is None or not batch.batch_rts:
            return ShardOutcome("done")
        await parts.out.event(
            "shard_claimed", worker=worker, shard=claim.shard, pid=_pid(), host=_host()
        )
        beat = asyncio.get_running_loop().create_task(_renew(store, gateway, claim))
        try:
            report = await batch.step(walked=False)
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, StoreError):
                await beat
        await gateway.flush()
        still_out = [
            b
            for rt in batch.batch_rts  # the action's and its judges' and repairs' rounds
            for b in await gateway.call(
                store.list_batches,
                ctx.workflow.name,
                tenants=(ctx.run.tenant,),
                open_only=True,
                action=rt.name,
            )
            if b.file == claim.file
        ]
        ready_at = store.clock.time() + (report.poll_interval if still_out else IDLE)
        return ShardOutcome("back", ready_at=ready_at, wake="online" if report.progressed else None)
    except StoreError as exc:
        if isinstance(exc, LeaseLost) or isinstance(gateway.broken, LeaseLost):
            return ShardOutcome("lost")
        raise
    finally:
        await gateway.close()


async def _renew(store: Store, gateway: StoreGateway, claim: Claim) -> None:
    while True:
        await store.clock.sleep(claim.ttl / 3)
        await gateway.call(store.renew_lease, claim.lease_name, claim.token, claim.ttl)


def _pid() -> int:
    import os

    return os.getpid()


def _host() -> str:
    import socket

    return socket.gethostname()
