"""The one place a run's parts are built, each with everything it needs passed to its
constructor: the runtimes of its actions, its control flags, the outcome writer, the
budget guard, its explicit context caches, the batch side, the approval gate, the
effects, the unit context and the record walk. ``agac run`` (engine/lifecycle/runs.py) and a worker's shard
(engine/workers/shards.py) both call :func:`assemble_run`; what a worker changes — the
range of records, shared slots and rate windows, a batch shard's file and fenced store
calls, a budget shared with other workers — comes in as a :class:`ShardSetup`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agac.config.websearch import runs_loop
from agac.engine.actions import build_runtime, is_batched
from agac.engine.approvals.effects import Effects
from agac.engine.approvals.gate import ApprovalGate
from agac.engine.batch.context import BatchContext
from agac.engine.batch.coordinator import BatchCoordinator
from agac.engine.batch.hybrid import LIVE_STATE, Hybrid
from agac.engine.batch.polling import Poller
from agac.engine.batch.rounds import Rounds, follow_up_actions
from agac.engine.batch.submission import Submitter, open_reservations
from agac.engine.batch.units import BatchUnits
from agac.engine.checks import JUDGE_ORIGIN
from agac.engine.lifecycle.contextcaches import ContextCaches
from agac.engine.limits.budget import BudgetGuard
from agac.engine.limits.rates import RateLimiter
from agac.engine.outcomes.marks import DispatchMarks, ShardIndex
from agac.engine.outcomes.turns import TurnLog
from agac.engine.outcomes.writer import OutcomeWriter
from agac.engine.ports import ShardMemory, UnitContext
from agac.engine.values import RunControl
from agac.engine.walk.shards import PriorRun, RecordWalk, shard_ranges
from agac.engine.walk.steps import StepPlan, has_fan_out
from agac.engine.walk.walker import Walker
from agac.jsontext import loads
from agac.providers.pricing import PriceTable

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from agac.config.model import Workflow
    from agac.config.project import Project
    from agac.engine.actions import ActionRuntime
    from agac.engine.batch.context import Pacer
    from agac.engine.limits.rates import RateWindow
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.outcomes.writer import Progress
    from agac.providers.base import Provider
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["RunParts", "ShardSetup", "assemble_run", "prior_run", "run_prices", "snapshot_files"]

Ledger = Callable[[BudgetGuard], Awaitable[tuple[float, int]]]


@dataclass(frozen=True)
class ShardSetup:
    """What a worker's shard changes in a run's parts (engine/workers/shards.py)."""

    ranges: list[tuple[int, int]]
    """The records of the claimed online shard; none for a batch shard."""
    slots: Mapping[str, AbstractAsyncContextManager[None]] = field(default_factory=dict)
    """Per action: its own slots taken together with the worker's (``--concurrency``)."""
    limiters: Mapping[str, RateWindow] = field(default_factory=dict)
    """Per action: its rate window in the store, shared by every worker."""
    batch_action: str | None = None
    """A batch shard's (action, file): only that action's batches, only that file's."""
    batch_file: str | None = None
    call: Callable[..., Awaitable[Any]] | None = None
    """Store calls of a batch shard's step, fenced on the shard lease."""
    pacer: Callable[[str], Pacer | None] | None = None
    """Submission windows in the store (B12 across workers)."""
    ledger: Ledger | None = None
    """What the run has spent, read from the store before each reservation (other workers
    spend from the same budget); the guard is passed in."""


@dataclass(frozen=True)
class RunParts:
    """A run, assembled: what the run loop drives."""

    run: RunRecord
    workflow: Workflow
    store: Store
    gateway: StoreGateway
    control: RunControl
    progress: Progress
    out: OutcomeWriter
    runtimes: list[ActionRuntime]
    plan: StepPlan
    walk: RecordWalk
    effects: Effects
    caches: ContextCaches
    budget: BudgetGuard | None = None
    batch: BatchCoordinator | None = None
    approvals: ApprovalGate | None = None


def run_prices(project: Project) -> PriceTable:
    return PriceTable(dict(project.config.prices) if project.config else {})


def prior_run(store: Store, run: RunRecord) -> PriorRun:
    """The previous final run whose failures ``run`` carries (R1 c); in the store thread."""
    prior = run.settings.prior
    states = store.action_states(prior) if prior else {}
    return PriorRun(prior, frozenset(a for a, (state, _) in states.items() if state == "failed"))


def assemble_run(
    project: Project,
    store: Store,
    run: RunRecord,
    workflow: Workflow,
    *,
    gateway: StoreGateway,
    providers: Mapping[str, Provider],
    progress: Progress,
    prior: PriorRun,
    files: list[dict[str, Any]],
    setup: ShardSetup | None = None,
) -> RunParts:
    """Build every part of ``run`` once. In the store thread for a worker (it reads the
    store: the budget's ledger, the batches out)."""
    slots = setup.slots if setup is not None else {}
    limiters = setup.limiters if setup is not None else {}
    admitted = (
        store.snapshot_attachments(run.snapshot_id)
        if any(a.attachments for a in workflow.actions)
        else {}
    )
    runtimes = [
        build_runtime(
            a,
            providers.get(a.provider or "") if a.kind == "llm" else None,
            project.root,
            slots=slots.get(a.name),
            limiter=limiters.get(a.name),
            admitted=admitted,
            workflow=run.workflow,
            providers=providers,
        )
        for a in workflow.actions
    ]
    plan = StepPlan(runtimes, has_fan_out(workflow))
    control = RunControl(
        store.clock,
        run.settings.deadline_at,
        run.settings.live_at,
        live=[a for a, (state, _) in store.action_states(run.id).items() if state == LIVE_STATE]
        if run.settings.live_at
        else (),
        start_at=run.settings.start_at,
    )
    caches = ContextCaches(run.id, store, gateway, control)
    out = OutcomeWriter(
        run.id,
        gateway,
        run_prices(project),
        progress,
        store.clock,
        # §8: calls of unknown outcome an answer to the same request prices
        unpriced=store.unpriced_unknown(run.workflow, tenant=run.tenant),
    )
    # Exhausted in one shard is exhausted in all, as in one process: a batch part refused
    # elsewhere must not be staged again here, and again, for ever.
    refused = setup is not None and run.settings.budget is not None and store.budget_refused(run.id)
    budget = _budget(run, out.prices, setup, refused)
    rounds = _rounds(project, runtimes, providers, admitted, run.workflow)
    batch_rts = [r for rt in runtimes if is_batched(rt) for r in (rt, *rounds.runtimes(rt.name))]
    step_rts = batch_rts
    if setup is not None and setup.batch_action is not None:
        # a batch shard steps (and reserves for) its own action and the rounds that follow it
        step_rts = [rt for rt in batch_rts if setup.batch_action in (rt.name, rt.follows)]
    units = (
        BatchUnits(
            run_id=run.id,
            workflow=run.workflow,
            tenant=run.tenant,
            batch_rts=batch_rts,
            plan=plan,
            store=store,
            gateway=gateway,
            out=out,
            control=control,
            budget=budget,
            rounds=rounds,
        )
        if batch_rts
        else None
    )
    batch = (
        _batch_step(
            project,
            store,
            run,
            gateway,
            out,
            control,
            plan,
            files,
            progress,
            budget,
            step_rts,
            units,
            setup,
            caches,
        )
        if units is not None
        else None
    )
    if budget is not None:
        held = open_reservations(
            store, budget, run.id, run.workflow, [rt.action for rt in step_rts], tenant=run.tenant
        )
        budget.sync(store, run, held)
    approvals = (
        ApprovalGate(
            project,
            run_id=run.id,
            workflow=run.workflow,
            tenant=run.tenant,
            store=store,
            gateway=gateway,
            out=out,
            control=control,
        )
        if any(a.approval is not None for a in workflow.actions)
        else None
    )
    effects = Effects(
        run_id=run.id,
        workflow=run.workflow,
        tenant=run.tenant,
        store=store,
        gateway=gateway,
        out=out,
        control=control,
    )
    memory = ShardMemory()
    ranges = setup.ranges if setup is not None else shard_ranges(files)
    # S1: what may have been sent is listed in the store before it is sent
    marks = DispatchMarks(
        run.id, gateway, out.prices, ShardIndex(shard_ranges(files)), clock=store.clock
    )
    ctx = UnitContext(
        run_id=run.id,
        workflow=run.workflow,
        tenant=run.tenant,
        fresh=run.fresh,
        control=control,
        out=out,
        lookups=gateway,
        memory=memory,
        effects=effects,
        budget=budget,
        batch=units,
        approvals=approvals,
        marks=marks,
        turns=TurnLog(run.id, run.tenant, store, gateway, out)
        if any(runs_loop(a) for a in workflow.actions)
        else None,
    )
    walk = RecordWalk(
        run_id=run.id,
        snapshot_id=run.snapshot_id,
        ranges=ranges,
        store=store,
        gateway=gateway,
        out=out,
        plan=plan,
        walker=Walker(plan, ctx),
        memory=memory,
        control=control,
        fresh=run.fresh,
        prior=prior,
        batch=units,
    )
    return RunParts(
        run=run,
        workflow=workflow,
        store=store,
        gateway=gateway,
        control=control,
        progress=progress,
        out=out,
        runtimes=runtimes,
        plan=plan,
        walk=walk,
        effects=effects,
        caches=caches,
        budget=budget,
        batch=batch,
        approvals=approvals,
    )


def _rounds(
    project: Project,
    runtimes: list[ActionRuntime],
    providers: Mapping[str, Provider],
    admitted: Mapping[str, tuple[str, int]],
    workflow: str,
) -> Rounds:
    """The follow-up rounds of the run's batch actions (engine/batch/rounds.py): a judge
    whose provider has no batch API is asked live."""
    judges: dict[tuple[str, str], ActionRuntime] = {}
    repairs: dict[str, ActionRuntime] = {}
    for rt in runtimes:
        if not is_batched(rt) or not rt.action.checks:
            continue
        judged, repair = follow_up_actions(rt.action)
        for (action, check), provider in judged:
            jrt = build_runtime(
                action,
                providers.get(provider),
                project.root,
                workflow=workflow,
                follows=rt.name,
                origin=JUDGE_ORIGIN,
            )
            if is_batched(jrt):
                judges[(rt.name, check)] = jrt
        if repair is not None:
            repairs[rt.name] = build_runtime(
                repair,
                rt.provider,
                project.root,
                admitted=admitted,
                workflow=workflow,
                follows=rt.name,
            )
    return Rounds(judges, repairs)


def _budget(
    run: RunRecord, prices: PriceTable, setup: ShardSetup | None, exhausted: bool
) -> BudgetGuard | None:
    """The run's budget guard (R5), or None: a run without a budget does no budget work."""
    cap = run.settings.budget
    if cap is None:
        return None
    shared = setup.ledger if setup is not None else None
    if shared is None:
        return BudgetGuard(cap.usd, cap.tokens, prices, exhausted=exhausted)
    guards: list[BudgetGuard] = []

    async def ledger() -> tuple[float, int]:
        return await shared(guards[0])

    guards.append(BudgetGuard(cap.usd, cap.tokens, prices, exhausted=exhausted, ledger=ledger))
    return guards[0]


def _batch_step(
    project: Project,
    store: Store,
    run: RunRecord,
    gateway: StoreGateway,
    out: OutcomeWriter,
    control: RunControl,
    plan: StepPlan,
    files: list[dict[str, Any]],
    progress: Progress,
    budget: BudgetGuard | None,
    step_rts: list[ActionRuntime],
    units: BatchUnits,
    setup: ShardSetup | None,
    caches: ContextCaches,
) -> BatchCoordinator:
    pacer = (
        setup.pacer
        if setup is not None and setup.pacer is not None
        else _local_pacers(project, control)
    )
    call = setup.call if setup is not None and setup.call is not None else gateway.call
    ctx = BatchContext(
        run=run,
        store=store,
        gateway=gateway,
        out=out,
        control=control,
        plan=plan,
        files=files,
        progress=progress,
        budget=budget,
        pacer=pacer,
        call=call,
        only_file=setup.batch_file if setup is not None else None,
        caches=caches,
    )
    return BatchCoordinator(ctx, step_rts, Submitter(ctx), Poller(ctx), units, Hybrid(ctx))


def _local_pacers(project: Project, control: RunControl) -> Callable[[str], Pacer | None]:
    """Per provider, a window of ``batch_submissions_per_minute`` in this process (B12)."""
    pacers: dict[str, RateLimiter] = {}
    options = dict(project.config.providers) if project.config else {}

    def pacer(provider: str) -> Pacer | None:
        config = options.get(provider)
        per_min = config.batch_submissions_per_minute if config else None
        if not per_min:
            return None
        if provider not in pacers:
            pacers[provider] = RateLimiter(rpm=float(per_min), tpm=None, clock=control.clock)
        return pacers[provider]

    return pacer


def snapshot_files(store: Store, run: RunRecord) -> list[dict[str, Any]]:
    """The run's input files (name, first seq, count)."""
    info = store.snapshot_info(run.snapshot_id)
    assert info is not None
    return list(loads(info.files))
