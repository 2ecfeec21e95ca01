"""Admission (docs/guarantees.md, Runs, R1): the workflow's open run is continued, or a new run is
admitted — its input snapshotted, its config, budget (R5: refused when the estimate
alone exceeds it) and deadline stored, and the outcomes of an identical previous run
carried in one statement (the R1 fast path).

Input snapshots (files or records given in memory) are engine/lifecycle/snapshots.py.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from agac.config.project import store_url
from agac.engine.actions import code_hashes, with_code_hashes
from agac.engine.batch.manual import abandon_batches
from agac.engine.crashpoints import maybe_crash
from agac.engine.graph import run_graph
from agac.engine.lifecycle.cheaper import cheaper_starts
from agac.engine.lifecycle.closing import close_run, run_event
from agac.engine.lifecycle.contextcaches import release_context_caches
from agac.engine.lifecycle.estimate import estimate_run
from agac.engine.lifecycle.leases import release_lease, take_run_lease
from agac.engine.lifecycle.modes import ModeChoice, keep_choices, resolve_auto
from agac.engine.lifecycle.snapshots import (
    InputSnapshot,
    current_snapshot_id,
    input_changes,
    input_source,
    snapshot_input,
)
from agac.engine.prefixes import context_texts, with_context_texts
from agac.errors import InputObjectsChanged, RefusedError, UsageError
from agac.jsontext import loads
from agac.keys import ESCAPED_KEYS
from agac.providers.pricing import PriceTable
from agac.store.runs import RunAlreadyOpen
from agac.store.values import Budget, RunSettings, Spent

if TYPE_CHECKING:
    from agac.config.model import Workflow
    from agac.config.project import Project
    from agac.engine.lifecycle.options import AsAdmitted, RunOptions
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["Admission", "InputSnapshot", "admit_run", "open_or_admit"]


class Admission(NamedTuple):
    """The run ``agac run`` executes, notes for the user, and whether this call admitted
    it: true only when this process's insert of the run is the one the store kept (the
    unique open-run index decides a race), never for a run found open or admitted by
    another process at the same moment."""

    run: RunRecord
    notes: list[str]
    admitted: bool


# -- admission ---------------------------------------------------------------------------


def admitted_overrides(store: Store, workflow: str, *, tenant: str) -> dict[str, Any] | None:
    """The per-run settings the tenant's open run of ``workflow`` was admitted with, or
    None when there is no open run: a caller loads the workflow file with them too
    (:class:`AsAdmitted`) when they differ from its own."""
    run = store.open_run(workflow, tenant=tenant)
    return dict(run.settings.overrides) if run is not None else None


def open_or_admit(
    project: Project,
    store: Store,
    workflow: Workflow,
    options: RunOptions,
    *,
    as_admitted: AsAdmitted | None = None,
) -> Admission:
    """The run ``agac run`` (and ``agac submit``) would execute: the tenant's open run of
    the workflow (R1) or a newly admitted one; with notes for the user and whether this
    call admitted it. ``options.overrides``
    are today's per-run settings; ``as_admitted`` the workflow as loaded with an open run's
    own, when they differ. Should another process admit a run of the workflow in the tenant
    at the same moment, the store keeps one (at most one open run per tenant and workflow)
    and this call continues it (``admitted`` false: it is the other process's to undo)."""
    options = replace(
        options, overrides={k: v for k, v in options.overrides.items() if v is not None}
    )
    try:
        return _open_or_admit(project, store, workflow, options, as_admitted)
    except RunAlreadyOpen:
        return _open_or_admit(
            project, store, workflow, replace(options, new=False, fresh=False), as_admitted
        )


def _open_or_admit(
    project: Project,
    store: Store,
    workflow: Workflow,
    options: RunOptions,
    as_admitted: AsAdmitted | None,
) -> Admission:
    overrides = options.overrides
    notes: list[str] = []
    open_run = store.open_run(workflow.name, tenant=options.tenant)
    if open_run is not None and (options.new or options.fresh):
        if _end_replaced(store, open_run, options):
            notes.append(f"ended run {open_run.id} as cancelled")
            notes += release_context_caches(project, store, open_run.id)
        open_run = None
    if options.fresh:
        notes.extend(
            abandon_batches(
                project, store, workflow.name, "abandoned by --fresh", tenant=options.tenant
            )
        )
    if open_run is not None:
        admitted = open_run.settings.overrides
        current = workflow
        if (
            admitted != overrides
            and as_admitted is not None
            and {k: v for k, v in as_admitted.overrides.items() if v is not None} == admitted
        ):
            current = as_admitted.workflow
        if admitted != overrides and overrides:
            notes.append(
                f"continuing run {open_run.id} with the settings it was admitted with "
                f"({admitted or 'none'}); today's {overrides} apply to new runs"
            )
        if current.input.records and options.source is None:
            snap_id = open_run.snapshot_id  # no records given: continue with the run's own
        else:
            source = input_source(current, project, options.source)
            attached = store.snapshot_attachments(open_run.snapshot_id)
            snap_id = current_snapshot_id(
                current,
                project,
                open_run.settings.limit,
                source,
                tenant=open_run.tenant,
                like=open_run.snapshot_id,
                hashes={p: h for p, (h, _) in attached.items()},
            )
            if open_run.config_hash == current.config_hash and open_run.snapshot_id != snap_id:
                _refuse_changed_objects(
                    open_run, workflow, input_changes(store, open_run.snapshot_id, source)
                )
        if open_run.config_hash != current.config_hash or open_run.snapshot_id != snap_id:
            what = "records" if current.input.records else "inputs"
            raise UsageError(
                f"run {open_run.id} of {workflow.name} is not finished, and the workflow file or "
                f"its {what} changed since it was admitted; finish it with `agac run "
                f"{workflow.name}` after restoring them, or end it and admit a new run with "
                f"`agac run {workflow.name} --new` (agac.run(..., new=True))"
            )
        if older_keys(store, open_run):
            raise UsageError(
                f"run {open_run.id} of {workflow.name} was admitted by an older agac, which "
                "wrote the keys of records holding '/' or '%' unescaped; end it and admit a "
                f"new run with `agac run {workflow.name} --new` (every answer is reused)"
            )
        notes.append(f"continuing run {open_run.id}")
        return Admission(open_run, notes, admitted=False)
    snapshot = snapshot_input(
        workflow, project, store, options.limit, options.source, tenant=options.tenant
    )
    notes.extend(
        f"{name}:1: warning: input file holds no records (a CSV may have only its "
        "header); it adds nothing to the run [empty_input]"
        for name in snapshot.empty_files
    )
    return Admission(
        admit_run(project, store, workflow, options, snapshot=snapshot), notes, admitted=True
    )


def _refuse_changed_objects(
    open_run: RunRecord,
    workflow: Workflow,
    changes: list[str],
) -> None:
    """An open run over objects that changed since its admission is refused naming them
    (``input_changed``): the run keeps the versions it read, a new run takes the new."""
    if changes:
        shown = "; ".join(changes[:5]) + (
            f"; and {len(changes) - 5} more" if len(changes) > 5 else ""
        )
        raise InputObjectsChanged(
            f"run {open_run.id} of {workflow.name} is not finished, and its input objects "
            f"changed since it was admitted: {shown}; `agac run {workflow.name} --new` ends it "
            "and takes the input as it is now (answers already paid for are reused)"
        )


def older_keys(store: Store, run: RunRecord) -> bool:
    """A run admitted before unit keys were escaped, over records whose keys it wrote
    differently (they hold ``/`` or ``%``): its outcomes are not continued or copied."""
    return run.settings.unit_keys != ESCAPED_KEYS and store.keys_need_escaping(run.snapshot_id)


def _end_replaced(store: Store, open_run: RunRecord, options: RunOptions) -> bool:
    """``--new``/``--fresh``: end the open run ``cancelled``, holding its lease so that a
    live owner is never ended under its feet (S3: LeaseHeld, exit 75, naming it). False
    when another process ended it first."""
    lease = take_run_lease(store, open_run.id, wait=options.wait)
    try:
        current = store.get_run(open_run.id)
        if current is None or current.final:
            return False  # ended (or withdrawn) by another process while this one waited
        # --new keeps proposals still open: the new run reuses those whose arguments are
        # unchanged (A1); --fresh reuses nothing.
        close_run(
            store,
            current,
            "cancelled",
            "ended by a newer run (--new/--fresh)",
            keep_proposals=not options.fresh,
        )
        return True
    finally:
        release_lease(store, lease)


def new_run_id(now: float) -> str:
    return f"{int(now):08x}{secrets.token_hex(4)}"


def admit_run(
    project: Project,
    store: Store,
    workflow: Workflow,
    options: RunOptions,
    *,
    retry_of: str | None = None,
    snapshot: InputSnapshot | None = None,
) -> RunRecord:
    original = store.get_run(retry_of) if retry_of is not None else None
    workflow = with_context_texts(
        workflow, project.root, context_texts(run_graph(original).workflow) if original else None
    )
    workflow = with_code_hashes(workflow, project.root)
    if snapshot is None:
        snapshot = snapshot_input(
            workflow, project, store, options.limit, options.source, tenant=options.tenant
        )
    run_id = new_run_id(store.clock.time())
    prior = None
    if retry_of is None and not options.fresh:
        last = store.latest_run(workflow.name, tenant=options.tenant, final=True)
        prior = last.id if last is not None else None
    settings = RunSettings(
        limit=options.limit, prior=prior, overrides=options.overrides, unit_keys=ESCAPED_KEYS
    )
    if retry_of is not None:
        settings = _inherited_limits(store, retry_of, settings)
    else:
        if workflow.budget is not None:
            settings = replace(settings, budget=Budget(workflow.budget.usd, workflow.budget.tokens))
        if workflow.deadline is not None:
            settings = replace(settings, deadline_at=store.clock.time() + workflow.deadline)
    workflow, choices = _chosen_modes(project, store, workflow, snapshot, settings, retry_of)
    if workflow.deadline is not None and retry_of is None:
        now = store.clock.time()
        prices = PriceTable(dict(project.config.prices) if project.config else {})
        starts = cheaper_starts(workflow, snapshot.count, prices, now, settings.deadline_at)
        settings = replace(settings, live_at=_live_at(workflow, now), start_at=starts)
    if settings.budget is not None and retry_of is None:
        _admission_estimate(project, store, workflow, snapshot, options, settings.budget)
    store.create_run(
        id=run_id,
        workflow=workflow.name,
        workflow_path=project.display(workflow.path),
        retry_of=retry_of,
        config=workflow.snapshot(),
        config_hash=workflow.config_hash,
        snapshot_id=snapshot.id,
        fresh=options.fresh,
        settings=settings,
        tenant=options.tenant,
    )
    carried = 0
    if prior is not None:
        carried = _carry_unchanged(store, prior, run_id, workflow, snapshot.id)
    admitted: dict[str, Any] = {
        "tenant": options.tenant,
        "records": snapshot.count,
        "retry_of": retry_of,
        "fresh": options.fresh,
        "prior": prior,
        "carried_outcomes": carried,
    }
    if snapshot.empty_files:
        admitted["empty_files"] = list(snapshot.empty_files)
    store.checkpoint(run_event(run_id, "run_admitted", admitted, store.clock.time()))
    for choice in choices:
        store.checkpoint(
            run_event(
                run_id,
                "run_mode_chosen",
                choice.as_event(),
                store.clock.time(),
                action=choice.action,
            )
        )
    run = store.get_run(run_id)
    assert run is not None
    maybe_crash("after_admit")  # admitted (snapshot, config, budget), nothing executed yet
    return run


def _chosen_modes(
    project: Project,
    store: Store,
    workflow: Workflow,
    snapshot: InputSnapshot,
    settings: RunSettings,
    retry_of: str | None,
) -> tuple[Workflow, list[ModeChoice]]:
    """The workflow as this run executes it: each ``run_mode: auto`` action online, flex
    or batch, chosen now over the snapshot's records and the time left to the deadline (a
    retry keeps the choices of the run it retries)."""
    if retry_of is not None:
        original = store.get_run(retry_of)
        assert original is not None
        workflow = keep_choices(workflow, run_graph(original).actions)
    now = store.clock.time()
    remaining = None if settings.deadline_at is None else settings.deadline_at - now
    return resolve_auto(
        workflow, snapshot.count, remaining=remaining, durable=store_url(project) != "memory"
    )


def _inherited_limits(store: Store, original_id: str, settings: RunSettings) -> RunSettings:
    """R2: a retry keeps the original's budget — what is left of it — its deadline and the
    instants its hybrid actions go live (B13)."""
    from agac.engine.limits.budget import spent_by

    original = store.get_run(original_id)
    assert original is not None
    if original.settings.budget is not None:
        usd, tokens = spent_by(store, original)
        settings = replace(
            settings, budget=original.settings.budget, spent_before=Spent(usd, tokens)
        )
    return replace(
        settings,
        deadline_at=original.settings.deadline_at,
        live_at=original.settings.live_at,
        start_at=original.settings.start_at,
    )


def _live_at(workflow: Workflow, now: float) -> dict[str, float]:
    """B13: the instant each ``hybrid`` action goes live, fixed at admission (R4); only
    for actions that run batched (``run_mode: auto`` may have chosen online)."""
    return {
        a.name: now + a.live_after
        for a in workflow.actions
        if a.live_after is not None and a.run_mode == "batch"
    }


def _admission_estimate(
    project: Project,
    store: Store,
    workflow: Workflow,
    snapshot: InputSnapshot,
    options: RunOptions,
    budget: Budget,
) -> None:
    """R5: refuse (exit 2) a run whose estimate alone exceeds its budget, unless
    ``--allow-over-estimate``."""
    records = (
        (r.key, loads(r.payload) if r.reason is None else None)
        for r in store.iter_records(snapshot.id)
    )
    plan = estimate_run(
        project,
        store,
        workflow,
        PriceTable(dict(project.config.prices) if project.config else {}),
        records,
        tenant=options.tenant,
        fresh=options.fresh,
    )
    if plan["within_budget"] or options.allow_over_estimate:
        return
    cost, tokens = plan["cost_usd"]["as_configured"], plan["input_tokens"] + plan["output_tokens"]
    cap = ", ".join(
        x
        for x in (
            f"${budget.usd:g}" if budget.usd is not None else "",
            f"{budget.tokens} tokens" if budget.tokens is not None else "",
        )
        if x
    )
    raise RefusedError(
        f"the estimate for {workflow.name} (${cost:.4f}, {tokens} tokens, worst case for "
        f"{plan['requests']} requests; {plan['reusable']} answers reused) exceeds its budget "
        f"({cap}); see `agac plan {workflow.name}`, raise the budget, or run with "
        "--allow-over-estimate to start anyway (it stops when the budget is spent)"
    )


def _carry_unchanged(
    store: Store, prior: str, run_id: str, workflow: Workflow, snapshot_id: str
) -> int:
    """R1 fast path. When the previous final run executed the very same resolved config over
    the very same input snapshot, every request renders to the same fingerprint, so its
    outcomes ARE this run's: answers reused, failures carried with the same reason, skips
    the same. Copied in one statement instead of re-rendering every unit.

    Not carried, and so executed normally: actions that failed as a whole in that run
    (R1 d, sent again), tool actions with ``cache: false`` or whose code changed since
    (decision 0096), and everything downstream of them."""
    prior_row = store.get_run(prior)
    if (
        prior_row is None
        or prior_row.config_hash != workflow.config_hash
        or prior_row.snapshot_id != snapshot_id
        or older_keys(store, prior_row)
        or context_texts(run_graph(prior_row).workflow) != context_texts(workflow)
    ):
        return 0  # (a context_prefix's files changed: its requests are new)
    redo = {a for a, (state, _) in store.action_states(prior).items() if state == "failed"}
    redo |= {a.name for a in workflow.actions if a.kind == "tool" and not a.cache}
    was = code_hashes(run_graph(prior_row).workflow)
    redo |= {a for a, code in code_hashes(workflow).items() if code is None or code != was.get(a)}
    redo |= {a.name for a in workflow.actions if redo.intersection(a.ancestors)}
    return store.carry_run_outcomes(prior, run_id, sorted(redo))
