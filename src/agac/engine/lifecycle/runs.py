"""``agac run``: continue the open run (R1) or admit a new one, own it (S3), execute it,
and end it or leave it paused (docs/guarantees.md, Runs).

States: ``queued`` (admitted), ``running``, ``waiting`` (batches out, an unknown effect),
``awaiting_approval`` (only people's decisions can move it, A1), ``cancelling`` (``agac
cancel`` asked its live owner to stop); final ``succeeded``, ``partial``, ``failed``,
``timed_out`` (R4 deadline), ``exhausted`` (R5 budget), ``cancelled`` — where several
apply, the first of cancelled, timed_out, exhausted, failed, partial, succeeded. A run
interrupted (Ctrl-C, a crash, a lost lease) stays non-final and the next ``agac run``
continues it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agac.config.model import Workflow
from agac.engine.actions import local_batch_notes
from agac.engine.gcpolicy import run_gc_policy
from agac.engine.graph import run_graph
from agac.engine.lifecycle.admission import open_or_admit
from agac.engine.lifecycle.assembly import assemble_run, prior_run, snapshot_files
from agac.engine.lifecycle.closing import close_run
from agac.engine.lifecycle.contextcaches import release_context_caches
from agac.engine.lifecycle.ending import finalize, finish_cancel, reread, time_out
from agac.engine.lifecycle.leases import HEARTBEAT_SECONDS, release_lease, take_run_lease
from agac.engine.lifecycle.loop import drive, install_interrupt
from agac.engine.lifecycle.options import AsAdmitted, RunOptions, RunResult
from agac.engine.limits.rates import batch_providers, connections_by_provider
from agac.engine.outcomes.gateway import StoreGateway
from agac.engine.outcomes.marks import account_lost_calls
from agac.engine.outcomes.writer import Progress
from agac.engine.report.run import RunSummary, build_summary
from agac.engine.values import Halt, PassResult
from agac.errors import AgacError, RefusedError, StoreGone, UsageError
from agac.providers.factory import open_providers

if TYPE_CHECKING:
    from agac.config.project import Project
    from agac.engine.outcomes.gateway import Lease
    from agac.providers.base import Provider
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["ProviderFactory", "RunWithdrawn", "execute_run", "no_running_loop", "start_run"]

ProviderFactory = Callable[..., "Mapping[str, Provider]"]
"""Opens the adapters a run needs by provider name (``open_providers``): the seam where
a transport or a test's provider plugs in."""


def start_run(
    project: Project,
    store: Store,
    workflow: Workflow,
    options: RunOptions,
    *,
    as_admitted: AsAdmitted | None = None,
) -> RunResult:
    """``agac run``: continue the open run (R1) or admit a new one, then execute it.

    ``options.overrides`` are the per-run settings (``--run-mode``, ``--poll-interval``,
    ``--batch-deadline``) and are stored with an admitted run; ``as_admitted`` is the
    workflow file loaded with the settings the open run was admitted with (when they
    differ), so that continuing it compares like with like.

    A run is admitted only when it can start (docs/python.md): whatever fails before its
    execution begins (a running event loop, a provider that cannot be opened, …) undoes
    the admission, so no open run is left behind."""
    no_running_loop()
    for _ in range(_WITHDRAWN_TRIES - 1):
        run, notes, admitted = open_or_admit(
            project, store, workflow, options, as_admitted=as_admitted
        )
        try:
            return execute_run(project, store, run, options, notes, admitted=admitted)
        except RunWithdrawn:
            continue  # its admitter undid it before it started: admit or continue anew
    run, notes, admitted = open_or_admit(project, store, workflow, options, as_admitted=as_admitted)
    return execute_run(project, store, run, options, notes, admitted=admitted)


_WITHDRAWN_TRIES = 3
"""How often ``agac run`` looks again when the run it found was withdrawn under it."""


class RunWithdrawn(RefusedError):
    """The run was withdrawn by the process that admitted it, which failed before the run
    started; run again."""


def no_running_loop() -> None:
    """UsageError when this thread runs an event loop (a run drives its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(
        "a run cannot start inside a running event loop (as in Jupyter) on this "
        "thread; use `await agac.arun(...)`, or agac.run(...), which runs the "
        "engine in its own thread"
    )


@dataclass
class _Launch:
    """Whether execution began (the run's parts were assembled and it is about to walk),
    and the lease this call took on the run (None until it has one)."""

    started: bool = False
    lease: Lease | None = None


def execute_run(
    project: Project,
    store: Store,
    run: RunRecord,
    options: RunOptions,
    notes: list[str] | None = None,
    *,
    providers: ProviderFactory | None = None,
    admitted: bool = False,
) -> RunResult:
    """Own ``run`` and execute it until it ends or pauses; the summary and notes. An
    error that stops it names the run (``run_id``), so the CLI can show the run's summary
    with it. ``admitted``: this call admitted it, so a failure before its execution
    begins undoes the admission (``discard_run``) and the error names no run — but only
    while this call still holds the run's lease: a run another process took meanwhile is
    that process's (S6: a process never deletes what it did not create, nor what someone
    else took over)."""
    launch = _Launch()
    try:
        return _execute_run(
            project, store, run, options, notes, providers or open_providers, launch
        )
    except BaseException as exc:
        discarded = False
        if admitted and not launch.started and launch.lease is not None:
            with contextlib.suppress(Exception):  # the original error is the one to report
                discarded = store.discard_run(run.id, launch.lease.token)
        # A withdrawn run, or one whose store file is gone (S7), has no summary to show.
        if (
            isinstance(exc, AgacError)
            and not discarded
            and not isinstance(exc, (RunWithdrawn, StoreGone))
        ):
            exc.run_id = exc.run_id or run.id
        raise


def _execute_run(
    project: Project,
    store: Store,
    run: RunRecord,
    options: RunOptions,
    notes: list[str] | None,
    providers: ProviderFactory,
    launch: _Launch,
) -> RunResult:
    lease = launch.lease = take_run_lease(store, run.id, wait=options.wait)
    interrupted = False
    counted: RunSummary | None = None  # the summary's counts, when finalize made them
    notes = list(notes or [])
    try:
        current = store.get_run(run.id)
        if current is None:
            raise RunWithdrawn(
                f"run {run.id} of {run.workflow} was withdrawn by the process "
                "that admitted it (it failed before the run started); run again"
            )
        if current.final:  # another process ended it while this one took the lease
            notes.append(f"run {run.id} was ended {current.state} by another process")
            return RunResult(build_summary(store, current), False, notes)
        run = current
        notes += local_batch_notes(run_graph(run).actions)
        lost = account_lost_calls(store, run, lease=lease.as_tuple())
        if lost:
            notes.append(
                f"counted {lost} calls of an earlier invocation whose outcome is "
                "unknown at their worst case (`agac cost` shows them)"
            )
        if run.state == "cancelling":
            launch.started = True
            notes += finish_cancel(project, store, run)  # its canceller stopped half-way
        elif run.deadline_passed(store.clock.time()):
            launch.started = True
            time_out(store, run)  # R4: even while nothing ran
        else:
            store.update_run(run.id, state="running")
            with run_gc_policy():
                try:
                    result = asyncio.run(
                        _execute(project, store, run, lease, options, providers, launch)
                    )
                except asyncio.CancelledError:  # a second Ctrl-C: stopped at once
                    result = PassResult("interrupted")
            if isinstance(result, Halt):  # a decision ended the run (fail_run, time_out_run)
                notes.append(result.why)
                close_run(
                    store, reread(store, run.id), result.state, result.why, reason="run_ended"
                )
            else:
                notes += result.waiting
                interrupted = result.kind == "interrupted"
                counted, more = _end_or_pause(project, store, run.id, result)
                notes += more
        if reread(store, run.id).final:  # whatever ended it: its caches go with it
            notes += release_context_caches(project, store, run.id)
    finally:
        release_lease(store, lease)
    return RunResult(
        build_summary(store, reread(store, run.id), counted=counted), interrupted, notes
    )


def _end_or_pause(
    project: Project, store: Store, run_id: str, result: PassResult
) -> tuple[RunSummary | None, list[str]]:
    """Write what the run loop's result means for the run: its final state, or the state
    it waits in. (The summary's counts when finalize made them, and notes.)"""
    kind = result.kind
    if kind == "complete":
        return finalize(store, run_id)[1], []
    if kind == "paused":
        store.update_run(run_id, state="waiting")
    elif kind == "awaiting_approval":
        store.update_run(run_id, state="awaiting_approval")  # A1: only people can move it
    elif kind == "failed_with_batches_out":
        refusals = [
            why for state, why in store.action_states(run_id).values() if state == "failed" and why
        ]
        close_run(
            store,
            reread(store, run_id),
            "failed",
            "; ".join(refusals)
            or "an action failed as a whole; batches accepted for other files stay out (B0)",
        )
    elif kind == "timed_out":
        time_out(store, reread(store, run_id))
    elif kind == "cancelled":
        return None, finish_cancel(project, store, reread(store, run_id))
    return None, []


async def _execute(
    project: Project,
    store: Store,
    run: RunRecord,
    lease: Lease,
    options: RunOptions,
    providers: ProviderFactory,
    launch: _Launch,
) -> PassResult | Halt:
    """Assemble the run and drive it until it completes, pauses or is stopped."""
    workflow = run_graph(run).workflow
    opened = providers(
        set(workflow.providers),
        project.config,
        connections=connections_by_provider(workflow.actions),
        batch=batch_providers(workflow.actions),
    )
    files = snapshot_files(store, run)
    progress = Progress(
        [a.name for a in workflow.actions],
        sum(int(f["count"]) for f in files),
        [options.on_progress] if options.on_progress else [],
    )
    for spent in store.usage_totals([run.id]):  # what earlier invocations of the run spent
        progress.add_cost(spent.action, float(spent.cost_usd or 0.0))
    # Other processes (agac serve) follow the run through its progress events (T6).
    gateway = StoreGateway(
        store,
        lease,
        tenant=run.tenant,
        progress=lambda: progress.event_row(run.id, store.clock.time()),
    )
    gateway.start()
    parts = assemble_run(
        project,
        store,
        run,
        workflow,
        gateway=gateway,
        providers=opened,
        progress=progress,
        prior=prior_run(store, run),
        files=files,
    )
    if options.on_start:
        options.on_start(progress, parts.control)
    restore = install_interrupt(parts.control) if options.handle_signals else None
    try:
        launch.started = True
        await parts.out.event("run_started", pid=os.getpid(), host=socket.gethostname())
        await parts.caches.prepare(parts.runtimes)  # before the first request is built
        fresh = asyncio.get_running_loop().create_task(parts.caches.keep_fresh())
        try:
            result = await drive(
                parts,
                wait=options.wait,
                was_waiting=run.state == "waiting",
                heartbeat_seconds=HEARTBEAT_SECONDS,
            )
        finally:
            fresh.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await fresh
        for name, why in parts.control.failed_actions.items():
            await gateway.call(store.set_action_state, run.id, name, "failed", why)
        if isinstance(result, PassResult) and result.kind == "interrupted":
            await parts.out.event("run_interrupted")
        await gateway.flush()
        # Every call sent has settled (a first Ctrl-C too): units still listed in a mark
        # were never sent, so they are not counted as calls of unknown outcome (S1).
        await gateway.call(store.clear_marks, run.id, None, gateway.fence)
        return result
    finally:
        if restore:
            restore()
        await gateway.close()
        for p in opened.values():
            await p.aclose()
