"""The run lifecycle (DESIGN §7): admit or continue (R1), retry (R2), own (S3),
execute, finalize into exactly one final state.

States: ``queued`` (admitted), ``running``, ``waiting`` (batches out, an unknown effect),
``awaiting_approval`` (only people's decisions can move it, A1), ``cancelling`` (``agac
cancel`` asked its live owner to stop); final ``succeeded``,
``partial``, ``failed``, ``timed_out`` (R4 deadline), ``exhausted`` (R5 budget),
``cancelled`` — where several apply, the first of cancelled, timed_out, exhausted,
failed, partial, succeeded. A run interrupted (Ctrl-C, a crash, a lost lease) stays
non-final and the next ``agac run`` continues it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agac.config.model import Workflow
from agac.engine.actions import is_batched
from agac.engine.admission import InputSnapshot, current_snapshot_id, snapshot_input
from agac.engine.approvals import ApprovalGate
from agac.engine.batch import BatchCoordinator
from agac.engine.budget import BudgetGuard
from agac.engine.closing import abandon_batches, cancel_open_batches, close_run
from agac.engine.crashpoints import maybe_crash
from agac.engine.executor import HEARTBEAT_SECONDS, Executor, Progress
from agac.engine.fanout import rejoin_targets
from agac.engine.gateway import Lease, StoreGateway
from agac.engine.gcpolicy import run_gc_policy
from agac.engine.summary import build_summary
from agac.errors import AgacError, LeaseHeld, Paused, RefusedError, UsageError
from agac.providers.factory import open_providers
from agac.providers.pricing import PriceTable
from agac.store.repository import FINAL_STATES, dumps, loads

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from agac.config.project import Project
    from agac.store.repository import Store

__all__ = ["RunOptions", "RunResult", "cancel_run", "execute_run", "finish_cancel", "retry_targets",
           "start_retry", "start_run"]

LEASE_TTL = 30.0


@dataclass
class RunOptions:
    new: bool = False
    fresh: bool = False
    limit: int | None = None
    wait: bool = False
    handle_signals: bool = False
    on_progress: Callable[[Progress], None] | None = None
    on_start: Callable[[Progress, Any], None] | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    allow_over_estimate: bool = False


@dataclass
class RunResult:
    summary: dict[str, Any]
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        state = self.summary["state"]
        if state == "succeeded":
            return 0
        if state in FINAL_STATES:
            return 1
        return 75


def _row(store: Store, run_id: str) -> Row:
    row = store.get_run(run_id)
    assert row is not None, run_id
    return row


def new_run_id() -> str:
    return f"{int(time.time()):08x}{secrets.token_hex(4)}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def take_run_lease(store: Store, run_id: str, *, wait: bool) -> Lease:
    """S3: own the run; a dead process on this host is taken over at once."""
    host, pid = socket.gethostname(), os.getpid()

    def may_take(row: Any) -> bool:
        return row.host == host and not _pid_alive(row.pid)

    while True:
        try:
            token = store.acquire_lease(f"run:{run_id}", host=host, pid=pid, ttl=LEASE_TTL,
                                        may_take=may_take)
            _no_shard_owners(store, run_id, token)
            return Lease(f"run:{run_id}", token, LEASE_TTL)
        except LeaseHeld as exc:
            if not wait:
                raise LeaseHeld(f"run {run_id} is {exc.message}; run again later, or use --wait") from exc
            time.sleep(1.0)


def _no_shard_owners(store: Store, run_id: str, token: int) -> None:
    """Worker mode (DESIGN §4 S3): the run lease and live shard leases of workers exclude
    each other. Expired shard leases are fenced (a paused worker can never write again);
    a live one gives the run lease back and names its worker."""
    if store.dialect != "postgresql":
        return
    live = store.fence_shards(run_id)
    if live:
        store.release_lease(f"run:{run_id}", token)
        first = live[0]
        raise LeaseHeld(f"held by worker {first.owner} (pid {first.pid} on {first.host}) and "
                        f"{len(live) - 1} more shard leases" if len(live) > 1 else
                        f"held by worker {first.owner} (pid {first.pid} on {first.host})")


# -- admission ---------------------------------------------------------------------------


def start_run(project: Project, store: Store, workflow: Workflow, options: RunOptions, *,
              overrides: dict[str, Any] | None = None,
              reload: Callable[[dict[str, Any]], Workflow] | None = None) -> RunResult:
    """``agac run``: continue the open run (R1) or admit a new one, then execute it.

    ``overrides`` are the per-run settings (``--run-mode``, ``--poll-interval``,
    ``--batch-deadline``) and are stored with an admitted run; ``reload(overrides)`` loads
    the workflow file again with the settings an open run was admitted with, so that
    continuing it compares like with like."""
    run, notes = open_or_admit(project, store, workflow, options, overrides=overrides, reload=reload)
    return execute_run(project, store, run, options, notes)


def open_or_admit(project: Project, store: Store, workflow: Workflow, options: RunOptions, *,
                  overrides: dict[str, Any] | None = None,
                  reload: Callable[[dict[str, Any]], Workflow] | None = None,
                  ) -> tuple[Row, list[str]]:
    """The run ``agac run`` (and ``agac submit``) would execute: the workflow's open run
    (R1) or a newly admitted one; with notes for the user."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    options.overrides = overrides
    notes: list[str] = []
    open_run = store.open_run(workflow.name)
    if open_run is not None and (options.new or options.fresh):
        # --new keeps proposals still open: the new run reuses those whose arguments are
        # unchanged (A1); --fresh reuses nothing.
        close_run(store, open_run, "cancelled", "ended by a newer run (--new/--fresh)",
                  keep_proposals=not options.fresh)
        notes.append(f"ended run {open_run.id} as cancelled")
        open_run = None
    if options.fresh:
        notes.extend(abandon_batches(project, store, workflow.name, "abandoned by --fresh"))
    if open_run is not None:
        admitted = loads(open_run.options).get("overrides") or {}
        current = reload(admitted) if reload is not None and admitted != overrides else workflow
        if admitted != overrides and overrides:
            notes.append(f"continuing run {open_run.id} with the settings it was admitted with "
                         f"({admitted or 'none'}); today's {overrides} apply to new runs")
        snap_id = current_snapshot_id(current, project, loads(open_run.options).get("limit"))
        if open_run.config_hash != current.config_hash or open_run.snapshot_id != snap_id:
            raise UsageError(
                f"run {open_run.id} of {workflow.name} is not finished, and the workflow file or "
                f"its inputs changed since it was admitted; finish it with `agac run "
                f"{workflow.name}` after restoring them, or end it and admit a new run with "
                f"`agac run {workflow.name} --new`"
            )
        notes.append(f"continuing run {open_run.id}")
        return open_run, notes
    snapshot = snapshot_input(workflow, project, store, options.limit)
    notes.extend(f"{name}:1: warning: input file holds no records (a CSV may have only its "
                 "header); it adds nothing to the run [empty_input]" for name in snapshot.empty_files)
    return admit_run(project, store, workflow, options, snapshot=snapshot), notes


def admit_run(project: Project, store: Store, workflow: Workflow, options: RunOptions,
              *, retry_of: str | None = None, snapshot: InputSnapshot | None = None) -> Row:
    if snapshot is None:
        snapshot = snapshot_input(workflow, project, store, options.limit)
    run_id = new_run_id()
    prior = None
    if retry_of is None and not options.fresh:
        last = store.latest_run(workflow.name, final=True)
        prior = last.id if last is not None else None
    run_options: dict[str, Any] = {"limit": options.limit, "prior": prior,
                                   "overrides": options.overrides}
    if retry_of is not None:
        run_options.update(_inherited_limits(store, retry_of))
    else:
        if workflow.budget is not None:
            run_options["budget"] = {"usd": workflow.budget.usd, "tokens": workflow.budget.tokens}
        if workflow.deadline is not None:
            run_options["deadline_at"] = time.time() + workflow.deadline
    if run_options.get("budget") and retry_of is None:
        _admission_estimate(project, store, workflow, snapshot, options, run_options["budget"])
    store.create_run(
        id=run_id, workflow=workflow.name, workflow_path=project.display(workflow.path),
        state="queued", retry_of=retry_of, config=dumps(workflow.snapshot()),
        config_hash=workflow.config_hash, snapshot_id=snapshot.id, fresh=options.fresh,
        options=dumps(run_options),
    )
    carried = 0
    if prior is not None:
        carried = _carry_unchanged(store, prior, run_id, workflow, snapshot.id)
    admitted: dict[str, Any] = {"records": snapshot.count, "retry_of": retry_of,
                                "fresh": options.fresh, "prior": prior, "carried_outcomes": carried}
    if snapshot.empty_files:
        admitted["empty_files"] = list(snapshot.empty_files)
    store.checkpoint(lease=None, events=[_event(run_id, "run_admitted", admitted)])
    run = _row(store, run_id)
    maybe_crash("after_admit")  # admitted (snapshot, config, budget), nothing executed yet
    return run


def _inherited_limits(store: Store, original_id: str) -> dict[str, Any]:
    """R2: a retry keeps the original's budget — what is left of it — and its deadline."""
    from agac.engine.budget import spent_by

    original = store.get_run(original_id)
    assert original is not None
    opts = loads(original.options) or {}
    out: dict[str, Any] = {}
    if opts.get("budget"):
        usd, tokens = spent_by(store, original)
        out["budget"] = opts["budget"]
        out["spent_before"] = {"usd": usd, "tokens": tokens}
    if opts.get("deadline_at") is not None:
        out["deadline_at"] = opts["deadline_at"]
    return out


def _admission_estimate(project: Project, store: Store, workflow: Workflow, snapshot: InputSnapshot,
                        options: RunOptions, budget: dict[str, Any]) -> None:
    """R5: refuse (exit 2) a run whose estimate alone exceeds its budget, unless
    ``--allow-over-estimate``."""
    from agac.engine.plan import estimate_run

    records = ((r.key, loads(r.payload) if r.reason is None else None)
               for r in store.iter_records(snapshot.id))
    plan = estimate_run(project, store, workflow, PriceTable(_price_overrides(project)), records,
                        fresh=options.fresh)
    if plan["within_budget"] or options.allow_over_estimate:
        return
    cost, tokens = plan["cost_usd"]["as_configured"], plan["input_tokens"] + plan["output_tokens"]
    cap = ", ".join(x for x in (f"${budget['usd']:g}" if budget.get("usd") is not None else "",
                                f"{budget['tokens']} tokens" if budget.get("tokens") is not None
                                else "") if x)
    raise RefusedError(
        f"the estimate for {workflow.name} (${cost:.4f}, {tokens} tokens, worst case for "
        f"{plan['requests']} requests; {plan['reusable']} answers reused) exceeds its budget "
        f"({cap}); see `agac plan {workflow.name}`, raise the budget, or run with "
        "--allow-over-estimate to start anyway (it stops when the budget is spent)")


def _carry_unchanged(store: Store, prior: str, run_id: str, workflow: Workflow, snapshot_id: str) -> int:
    """R1 fast path. When the previous final run executed the very same resolved config over
    the very same input snapshot, every request renders to the same fingerprint, so its
    outcomes ARE this run's: answers reused, failures carried with the same reason, skips
    the same. Copied in one statement instead of re-rendering every unit.

    Not carried, and so executed normally: actions that failed as a whole in that run
    (R1 d, sent again), tool actions with ``cache: false``, and everything downstream of
    either."""
    prior_row = store.get_run(prior)
    if prior_row is None or prior_row.config_hash != workflow.config_hash \
            or prior_row.snapshot_id != snapshot_id:
        return 0
    redo = {a for a, (state, _) in store.action_states(prior).items() if state == "failed"}
    redo |= {a.name for a in workflow.actions if a.kind == "tool" and not a.cache}
    redo |= {a.name for a in workflow.actions if redo.intersection(a.ancestors)}
    return store.carry_run_outcomes(prior, run_id, sorted(redo))


def _event(run_id: str, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": run_id, "kind": kind, "action": None, "unit_key": None,
            "data": dumps(data), "created_at": time.time()}


# -- execution ------------------------------------------------------------------------------


def execute_run(project: Project, store: Store, run: Row, options: RunOptions,
                notes: list[str] | None = None) -> RunResult:
    """Execute the admitted ``run``; an error that stops it names the run (``run_id``), so
    the CLI can show the run's summary with it."""
    try:
        return _execute_run(project, store, run, options, notes)
    except AgacError as exc:
        exc.run_id = exc.run_id or run.id
        raise


def _execute_run(project: Project, store: Store, run: Row, options: RunOptions,
                 notes: list[str] | None) -> RunResult:
    lease = take_run_lease(store, run.id, wait=options.wait)
    interrupted = False
    counted: dict[str, Any] | None = None  # the summary's counts, when finalize made them
    notes = list(notes or [])
    try:
        run = _row(store, run.id)
        if run.state == "cancelling":
            notes += finish_cancel(project, store, run)  # its canceller stopped half-way
        elif _deadline_passed(run):
            _time_out(store, run)  # R4: even while nothing ran
        else:
            workflow = Workflow.from_snapshot(loads(run.config))
            store.update_run(run.id, state="running")
            with run_gc_policy():
                outcome, waiting = asyncio.run(_execute(project, store, run, workflow, lease, options))
            notes += waiting
            interrupted = outcome == "interrupted"
            if outcome == "complete":
                counted = finalize(store, run.id)[1]
            elif outcome == "paused":
                store.update_run(run.id, state="waiting")
            elif outcome == "awaiting_approval":
                store.update_run(run.id, state="awaiting_approval")  # A1: only people can move it
            elif outcome.startswith("halted:"):  # a decision ended the run (fail_run, time_out_run)
                close_run(store, _row(store, run.id), outcome.partition(":")[2], waiting[0],
                          reason="run_ended")
            elif outcome == "failed_with_batches_out":
                close_run(store, _row(store, run.id), "failed",
                          "an action failed as a whole; batches accepted for other files stay out (B0)")
            elif outcome == "timed_out":
                _time_out(store, _row(store, run.id))
            elif outcome == "cancelled":
                notes += finish_cancel(project, store, _row(store, run.id))
    finally:
        _release(store, lease)
    return RunResult(build_summary(store, _row(store, run.id), counted=counted), interrupted, notes)


def _release(store: Store, lease: Lease) -> None:
    try:
        store.release_lease(lease.name, lease.token)
    except Exception:  # noqa: BLE001 - the lease expires by itself
        pass


def _deadline_passed(run: Row) -> bool:
    deadline_at = (loads(run.options) or {}).get("deadline_at")
    return deadline_at is not None and time.time() >= deadline_at


def _time_out(store: Store, run: Row) -> None:
    """R4: end the run ``timed_out``; units never sent are skipped ``deadline``, batches
    out stay out for the next run to adopt (B0)."""
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(loads(run.options)["deadline_at"]))
    close_run(store, run, "timed_out", f"its deadline passed at {at}", reason="deadline")


def finish_cancel(project: Project, store: Store, run: Row, why: str = "cancelled by agac cancel"
                  ) -> list[str]:
    """End a run ``cancelled`` (the caller owns its lease): its batches out are cancelled at
    the provider and their records fail ``batch_cancelled``; units never sent are skipped
    ``cancelled``."""
    notes, units = cancel_open_batches(project, store, run.workflow, why, reason="batch_cancelled",
                                       state="cancelled")
    close_run(store, run, "cancelled", why, reason="cancelled", failed_in_batches=units)
    return notes


def cancel_run(project: Project, store: Store, run: Row) -> RunResult:
    """``agac cancel``: end a non-final run ``cancelled``. A run owned by a live process is
    marked ``cancelling``; its owner stops sending at its next heartbeat and ends it."""
    if run.state in FINAL_STATES:
        raise RefusedError(f"run {run.id} of {run.workflow} already ended {run.state}; "
                           "a final state never changes")
    store.update_run(run.id, state="cancelling")
    try:
        lease = take_run_lease(store, run.id, wait=False)
    except LeaseHeld as exc:
        until = time.monotonic() + LEASE_TTL + HEARTBEAT_SECONDS
        while time.monotonic() < until:
            time.sleep(0.25)
            row = store.get_run(run.id)
            if row is not None and row.state in FINAL_STATES:
                return RunResult(build_summary(store, row), notes=[f"run {run.id} was cancelled by its owner"])
        raise Paused(f"run {run.id} is cancelling, but its owner has not ended it yet ({exc.message}); "
                     f"`agac cancel {run.id}` again later") from exc
    try:
        notes = finish_cancel(project, store, _row(store, run.id))
    finally:
        _release(store, lease)
    return RunResult(build_summary(store, _row(store, run.id)), notes=notes)


async def _execute(project: Project, store: Store, run: Row, workflow: Workflow, lease: Lease,
                   options: RunOptions) -> tuple[str, list[str]]:
    """Run until every unit settled (``complete``), the run waits on batches (``paused``),
    or it was interrupted (``interrupted``, Ctrl-C); with what it waits on."""
    llm_providers = {a.provider for a in workflow.actions if a.kind == "llm" and a.provider}
    providers = open_providers(llm_providers, project.config)
    info = store.snapshot_info(run.snapshot_id)
    assert info is not None
    opts = loads(run.options)
    prior = opts.get("prior")
    prior_failed = frozenset(
        a for a, (state, _) in (store.action_states(prior).items() if prior else []) if state == "failed"
    )
    progress = Progress([a.name for a in workflow.actions], info.record_count)
    for spent in store.usage_totals([run.id]):  # what earlier invocations of the run spent
        progress.add_cost(spent.action, float(spent.cost_usd or 0.0))
    if options.on_progress:
        progress.listeners.append(options.on_progress)
    # Other processes (agac serve) follow the run through its progress events (T6).
    gateway = StoreGateway(store, lease, progress=lambda: progress.event_row(run.id))
    gateway.start()
    executor = Executor(
        run_id=run.id, workflow=workflow, store=store, gateway=gateway, providers=providers,
        prices=PriceTable(_price_overrides(project)), root=project.root,
        snapshot_files=loads(info.files), fresh=bool(run.fresh), prior_run_id=prior,
        prior_failed_actions=prior_failed, progress=progress,
        provider_options=dict(project.config.providers) if project.config else {},
    )
    executor.snapshot_id = run.snapshot_id
    executor.run_row = run
    executor.deadline_at = opts.get("deadline_at")
    if any(is_batched(rt) for rt in executor.runtimes):
        executor.batch = BatchCoordinator(executor)
    if any(a.approval is not None for a in workflow.actions):
        executor.approvals = ApprovalGate(executor, project)
    if opts.get("budget"):
        executor.budget = BudgetGuard(opts["budget"].get("usd"), opts["budget"].get("tokens"),
                                      executor.prices)
        # Batches this run has out (from an earlier invocation) still hold their reservations.
        held = executor.batch.open_reservations() if executor.batch is not None else {}
        executor.budget.sync(store, run, held)
    if options.on_start:
        options.on_start(progress, executor)
    restore = _install_interrupt(executor) if options.handle_signals else None
    try:
        await executor.event("run_started", pid=os.getpid(), host=socket.gethostname())
        outcome = await _passes(executor, options, was_waiting=run.state == "waiting")
        for rt in executor.runtimes:
            if rt.stopped:
                await gateway.call(store.set_action_state, run.id, rt.name, "failed", rt.stopped)
        if outcome == "interrupted":
            await executor.event("run_interrupted")
        await gateway.flush()
        return outcome, list(executor.waiting)
    finally:
        if restore:
            restore()
        await gateway.close()
        for p in providers.values():
            await p.aclose()


async def _passes(executor: Executor, options: RunOptions, *, was_waiting: bool = False) -> str:
    """Online passes and batch steps until nothing moves (see engine/batch.py).

    A run that ended its last invocation ``waiting`` had walked every record and found
    nothing to do but wait on batches; only batch time has passed since, so it asks the
    provider first and walks the records again only when something was read. The same
    holds between polls with ``--wait``."""
    step_first = was_waiting and executor.batch is not None
    while True:
        if not step_first:
            if executor.approvals is not None:
                executor.approvals.begin_pass()
            complete = await executor.execute(executor.snapshot_id or "")
            if executor.cancel_requested:
                return "cancelled"
            if executor.approvals is not None and executor.approvals.halt is not None:
                state, why = executor.approvals.halt
                executor.waiting = [why]
                return f"halted:{state}"
            if complete:
                return "complete"
            if executor.deadline_passed():
                return "timed_out"
            if executor.stopping:
                return "interrupted"
            if executor.batch is None:
                approvals = await _approvals_waiting(executor)
                if not executor.effects_waiting and not approvals:
                    return "interrupted"
                executor.waiting = list(executor.effects_waiting) + approvals  # E2, A1: people
                await executor.gateway.flush()
                return "awaiting_approval" if approvals else "paused"
        elif executor.cancel_requested:
            return "cancelled"
        elif executor.deadline_passed():
            return "timed_out"
        step_first = False
        await executor.gateway.flush()
        report = await executor.batch.step()
        if report.progressed:
            continue
        if executor.refused_actions:
            return "failed_with_batches_out"
        report.waiting += executor.effects_waiting
        for line in report.waiting:
            await executor.event("waiting", reason="batch", detail=line)
        approvals = await _approvals_waiting(executor)
        executor.waiting = report.waiting + approvals
        if approvals and not await executor.gateway.call(
                executor.store.list_batches, executor.workflow.name, open_only=True):
            return "awaiting_approval"  # B11: no batch to poll, only people can move it
        if not options.wait:
            return "paused"
        pause = report.poll_interval
        if executor.deadline_at is not None:
            pause = max(0.0, min(pause, executor.deadline_at - time.time()))
        await asyncio.sleep(pause)
        step_first = True


async def _approvals_waiting(executor: Executor) -> list[str]:
    """What units wait on people's decisions (A1), reported once as ``waiting approval``."""
    if executor.approvals is None:
        return []
    lines = executor.approvals.waiting_lines()
    for line in lines:
        await executor.event("waiting", reason="approval", detail=line)
    return lines


def _price_overrides(project: Project) -> dict[str, Any]:
    return dict(project.config.prices) if project.config else {}


def _install_interrupt(executor: Executor) -> Callable[[], None]:
    """First Ctrl-C: stop sending, settle what is in flight. Second: stop at once."""
    loop = asyncio.get_running_loop()
    hits = {"n": 0}

    def on_sigint() -> None:
        hits["n"] += 1
        if hits["n"] == 1:
            executor.stop()
            import sys

            print("\nstopping: settling calls in flight (Ctrl-C again to stop at once)",
                  file=sys.stderr)
        else:
            loop.remove_signal_handler(signal.SIGINT)
            raise KeyboardInterrupt

    loop.add_signal_handler(signal.SIGINT, on_sigint)

    def restore() -> None:
        loop.remove_signal_handler(signal.SIGINT)

    return restore


# -- finalization --------------------------------------------------------------------------


HALT_STATES = (("deadline", "timed_out"), ("budget_exhausted", "exhausted"))
"""Reasons of units a run never sent because it had to stop, and the final state each
gives, in DESIGN §7's order of precedence (after ``cancelled``)."""


def decide_state(summary: dict[str, Any], action_states: dict[str, tuple[str, Any]],
                 partial_ok: bool, halts: frozenset[str] = frozenset()) -> str:
    for reason, state in HALT_STATES:
        if reason in halts:
            return state
    actions = summary["actions"].values()
    failed = sum(a["failed"] for a in actions)
    answered = sum(a["answered"] for a in actions)
    if any(state == "failed" for state, _ in action_states.values()):
        return "failed"
    if failed and answered == 0:
        return "failed"
    if failed:
        return "partial" if partial_ok else "failed"
    return "succeeded"


def finalize(store: Store, run_id: str) -> tuple[str, dict[str, Any]]:
    """End a run whose every unit settled with its final state (DESIGN §7); with the
    summary counted for the decision (its counts stay true after the run ended)."""
    run = _row(store, run_id)
    summary = build_summary(store, run)
    pending = sum(a["pending"] for a in summary["actions"].values())
    if pending:
        return run.state, summary
    maybe_crash("before_finalize")  # every outcome durable, the final state not yet written
    config = loads(run.config)
    # Only this run's own stops count: skips carried over from the run it retries do not.
    halts = frozenset(r.reason for r in store.outcome_counts(run_id)
                      if r.status == "skipped" and r.origin != "carried" and r.reason)
    state = decide_state(summary, store.action_states(run_id), bool(config.get("partial_ok", True)),
                         halts)
    store.end_run(run_id, state)
    store.checkpoint(lease=None, events=[_event(run_id, "run_ended", {"state": state,
                                                                       "cost_usd": summary["cost_usd"]})])
    return state, summary


# -- retry (R2) ----------------------------------------------------------------------------


def retry_targets(store: Store, original: Row, action: str | None, record: str | None,
                  include_outstanding: bool = False,
                  ) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(failed units to re-ask, downstream units skipped because of them). With
    ``include_outstanding`` the units left waiting on abandoned batches are re-asked too."""
    config = loads(original.config)
    descendants: dict[str, set[str]] = {a["name"]: set() for a in config["actions"]}
    for a in config["actions"]:
        for anc in a["ancestors"]:
            descendants[anc].add(a["name"])
    rows = store.failed_units(original.id, with_outstanding=include_outstanding)
    targets = {
        (row.action, row.unit_key)
        for row in rows
        if (action is None or row.action == action) and (
            record is None or row.unit_key == record or row.unit_key.startswith(record + "/"))
    }
    keys = {k for _, k in targets}
    downstream: set[tuple[str, str]] = set()
    if keys:
        for key in keys:
            for o in store.unit_outcomes(original.id, key):
                if o.status == "skipped" and o.reason in ("upstream_failed", "batch_outstanding") and any(
                    o.action in descendants[a] for a, k in targets if k == key
                ):
                    downstream.add((o.action, key))
        seqs = {(row.action, row.unit_key): row.seq for row in rows}
        downstream |= rejoin_targets(store, original.id, config["actions"], targets, seqs)
    return targets, downstream


def start_retry(project: Project, store: Store, workflow: Workflow, options: RunOptions,
                action: str | None, record: str | None, dry_run: bool,
                abandon_in_flight: bool = False) -> RunResult | dict[str, Any]:
    """``agac retry`` (R2): a new run with ``retry_of`` over the same input snapshot."""
    open_run = store.open_run(workflow.name)
    if open_run is not None:
        raise RefusedError(
            f"run {open_run.id} of {workflow.name} is not finished; finish it with "
            f"`agac run {workflow.name}` before retrying"
        )
    out = store.list_batches(workflow.name, open_only=True)
    if out and not abandon_in_flight:
        names = ", ".join(f"{b.provider_batch_id or b.key} ({b.file})" for b in out)
        raise RefusedError(
            f"batches of {workflow.name} are still out: {names}; `agac run {workflow.name}` "
            "collects them, or use --abandon-in-flight if the provider no longer has them (B10)")
    original = store.latest_run(workflow.name, final=True)
    if original is None:
        raise RefusedError(f"{workflow.name} has no finished run to retry; run it with `agac run`")
    if action is not None and action not in workflow.action_names:
        raise UsageError(f"{workflow.name} has no action {action!r}")
    notes: list[str] = []
    if out and abandon_in_flight and not dry_run:
        notes = abandon_batches(project, store, workflow.name, "abandoned by agac retry --abandon-in-flight")
    targets, downstream = retry_targets(store, original, action, record,
                                        include_outstanding=abandon_in_flight)
    if dry_run:
        return {"retry_of": original.id, "workflow": workflow.name,
                "units": sorted([{"action": a, "key": k} for a, k in targets], key=lambda d: (d["action"], d["key"])),
                "downstream": len(downstream)}
    if not targets:
        raise RefusedError(f"run {original.id} of {workflow.name} has no failed units to retry"
                           + (" matching the filter" if action or record else ""))
    info = store.snapshot_info(original.snapshot_id)
    assert info is not None
    snapshot = InputSnapshot(original.snapshot_id, loads(info.files), info.record_count)
    run = admit_run(project, store, workflow, options, retry_of=original.id, snapshot=snapshot)
    store.copy_outcomes(original.id, run.id, targets | downstream)
    return execute_run(project, store, run, options,
                       notes + [f"retrying {len(targets)} failed units of run {original.id}"])
