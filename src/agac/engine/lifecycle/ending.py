"""Ending a run in exactly one final state (docs/guarantees.md, Runs): finalize a run whose every unit
settled, time one out (R4), finish a cancel, and ``agac cancel`` itself.

The state is decided from the store (``failed`` if an action failed as a whole or
nothing was answered; ``partial`` if some failed, ``failed`` instead with ``partial_ok:
false``; else ``succeeded``; a run that had to stop — deadline, budget — takes that
state first) and written once: a final state never changes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agac.engine.batch.manual import cancel_open_batches
from agac.engine.crashpoints import maybe_crash
from agac.engine.graph import run_graph
from agac.engine.lifecycle.closing import close_run, run_event
from agac.engine.lifecycle.contextcaches import release_context_caches
from agac.engine.lifecycle.leases import HEARTBEAT_SECONDS, LEASE_TTL, release_lease, take_run_lease
from agac.engine.lifecycle.options import RunResult
from agac.engine.report.run import RunSummary, build_summary
from agac.errors import LeaseHeld, Paused, RefusedError
from agac.reasons import RUN_ENDING
from agac.store.values import FINAL_STATES

if TYPE_CHECKING:
    from agac.config.project import Project
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["cancel_run", "decide_state", "finalize", "finish_cancel", "reread", "time_out"]


def reread(store: Store, run_id: str) -> RunRecord:
    """The run as the store has it now."""
    run = store.get_run(run_id)
    assert run is not None, run_id
    return run


def decide_state(
    summary: Mapping[str, Any],
    action_states: dict[str, tuple[str, Any]],
    partial_ok: bool,
    halts: frozenset[str] = frozenset(),
) -> str:
    for reason, state in RUN_ENDING:  # the registry's ``ends_run``, in precedence order
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


def finalize(store: Store, run_id: str) -> tuple[str, RunSummary]:
    """End a run whose every unit settled with its final state (docs/guarantees.md, Runs); with the
    summary counted for the decision (its counts stay true after the run ended)."""
    run = reread(store, run_id)
    summary = build_summary(store, run)
    pending = sum(a.pending for a in summary.actions.values())
    if pending:
        return run.state, summary
    maybe_crash("before_finalize")  # every outcome durable, the final state not yet written
    # Only this run's own stops count: skips carried over from the run it retries do not.
    halts = frozenset(
        r.reason
        for r in store.outcome_counts(run_id)
        if r.status == "skipped" and r.origin != "carried" and r.reason
    )
    state = decide_state(
        summary, store.action_states(run_id), run_graph(run).workflow.partial_ok, halts
    )
    store.end_run(run_id, state)
    store.clear_marks(run_id)  # every unit has its outcome: nothing under a mark is lost
    store.checkpoint(
        run_event(
            run_id, "run_ended", {"state": state, "cost_usd": summary.cost_usd}, store.clock.time()
        )
    )
    return state, summary


def time_out(store: Store, run: RunRecord) -> None:
    """R4: end the run ``timed_out``; units never sent are skipped ``deadline``, batches
    out stay out for the next run to adopt (B0)."""
    assert run.settings.deadline_at is not None
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.settings.deadline_at))
    close_run(store, run, "timed_out", f"its deadline passed at {at}", reason="deadline")


def finish_cancel(
    project: Project, store: Store, run: RunRecord, why: str = "cancelled by agac cancel"
) -> list[str]:
    """End a run ``cancelled`` (the caller owns its lease): its batches out are cancelled at
    the provider and their records fail ``batch_cancelled``; units never sent are skipped
    ``cancelled``; its explicit context caches are deleted."""
    notes, units = cancel_open_batches(
        project,
        store,
        run.workflow,
        why,
        tenant=run.tenant,
        reason="batch_cancelled",
        state="cancelled",
    )
    close_run(store, run, "cancelled", why, reason="cancelled", failed_in_batches=units)
    return notes + release_context_caches(project, store, run.id)


def cancel_run(project: Project, store: Store, run: RunRecord) -> RunResult:
    """``agac cancel``: end a non-final run ``cancelled``. A run owned by a live process is
    marked ``cancelling``; its owner stops sending at its next heartbeat and ends it."""
    if run.state in FINAL_STATES:
        raise RefusedError(
            f"run {run.id} of {run.workflow} already ended {run.state}; a final state never changes"
        )
    store.update_run(run.id, state="cancelling")
    clock = store.clock
    try:
        lease = take_run_lease(store, run.id, wait=False)
    except LeaseHeld as exc:
        until = clock.monotonic() + LEASE_TTL + HEARTBEAT_SECONDS
        while clock.monotonic() < until:
            clock.wait(0.25)
            row = store.get_run(run.id)
            if row is not None and row.state in FINAL_STATES:
                return RunResult(
                    build_summary(store, row), notes=[f"run {run.id} was cancelled by its owner"]
                )
        raise Paused(
            f"run {run.id} is cancelling, but its owner has not ended it yet ({exc.message}); "
            f"`agac cancel {run.id}` again later"
        ) from exc
    try:
        notes = finish_cancel(project, store, reread(store, run.id))
    finally:
        release_lease(store, lease)
    return RunResult(build_summary(store, reread(store, run.id)), notes=notes)
