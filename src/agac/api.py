"""agac as a library: every CLI command is one of these calls.

Each function finds the project (from ``project`` or the working directory), opens
the store, does one thing and returns plain data (dicts, lists, iterators), so tests
and notebooks drive agac exactly as the CLI does.

The store, the engine and SQLAlchemy are imported by the calls that use them, not at
module import: ``agac validate`` never touches the store and must start fast.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.config.model import Workflow
from agac.config.project import Project, find_project, store_url
from agac.errors import UsageError
from agac.jsontext import loads

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = [
    "approvals_list",
    "approvals_show",
    "approve",
    "cancel",
    "cost",
    "effects_compensate",
    "effects_list",
    "effects_resolve",
    "events",
    "export_rows",
    "gc",
    "list_records",
    "list_runs",
    "load_workflow",
    "open_store",
    "plan",
    "record_session",
    "reject",
    "render",
    "resolve_run",
    "retry",
    "revise",
    "run",
    "status",
    "submit",
    "validate",
    "worker",
    "workers",
]


def _project(project: Project | Path | str | None) -> Project:
    if isinstance(project, Project):
        return project
    return find_project(Path(project) if project else None)


def open_store(project: Project | None = None) -> Store:
    """The project's store: ``AGAC_STORE`` wins over ``store:`` in agac.yml (DESIGN §4)."""
    from agac.store.repository import Store

    return Store(store_url(_project(project)))


def _history(proj: Project) -> Store:
    """The store, for reading earlier runs; refused for ``store: memory``, which keeps
    nothing once a run's process ends."""
    if store_url(proj) == "memory":
        raise UsageError("this project's store is memory: it keeps nothing once a run ends, so "
                         "there is no earlier run to read; use the default SQLite store (remove "
                         "`store: memory` from agac.yml and unset AGAC_STORE) or PostgreSQL")
    return open_store(proj)


@contextlib.contextmanager
def _history_of(project: Project | Path | str | None) -> Iterator[tuple[Project, Store]]:
    """The project and its store for reading (see :func:`_history`), closed afterwards."""
    proj = _project(project)
    store = _history(proj)
    try:
        yield proj, store
    finally:
        store.close()


def load_workflow(ref: str | Path, project: Project | Path | str | None = None, *,
                  run_mode: str | None = None, poll_interval: float | str | None = None,
                  batch_deadline: float | str | None = None,
                  budget_usd: float | None = None) -> Workflow:
    """The validated workflow ``ref`` (a path or a ``name:``); ConfigError with every problem.

    ``run_mode``, ``poll_interval``, ``batch_deadline`` and ``budget_usd`` are this run's
    own settings (seconds or a duration string; USD), merged before validation (DESIGN §3).
    """
    from agac.config.workflow import load_workflow as _load
    from agac.providers.pricing import PriceTable

    proj = _project(project)
    prices = PriceTable(dict(proj.config.prices))
    return _load(ref, proj, run_mode=run_mode, poll_interval=poll_interval,
                 batch_deadline=batch_deadline, price_lookup=prices.known, budget_usd=budget_usd)


def validate(ref: str | Path, project: Project | Path | str | None = None, *,
             run_mode: str | None = None, poll_interval: float | str | None = None,
             batch_deadline: float | str | None = None) -> tuple[Workflow | None, list[Any]]:
    """(workflow or None, every error and warning) without raising for config errors."""
    from agac.config.workflow import validate_workflow
    from agac.providers.pricing import PriceTable

    proj = _project(project)
    prices = PriceTable(dict(proj.config.prices))
    return validate_workflow(ref, proj, run_mode=run_mode, poll_interval=poll_interval,
                             batch_deadline=batch_deadline, price_lookup=prices.known)


def run(ref: str | Path, project: Project | Path | str | None = None, *,
        run_mode: str | None = None, poll_interval: float | str | None = None,
        batch_deadline: float | str | None = None, budget_usd: float | None = None,
        **options: Any) -> Any:
    """``agac run``: continue the open run or admit a new one and execute it (R1).

    ``budget_usd`` caps a new run's spending instead of the file's ``budget.usd`` (R5).
    Options: ``new``, ``fresh``, ``limit``, ``wait``, ``allow_over_estimate``,
    ``handle_signals``, ``on_progress``, ``on_start``. Returns a
    :class:`agac.engine.runs.RunResult`.
    """
    from agac.engine.runs import RunOptions, start_run

    proj = _project(project)
    overrides: dict[str, Any] = {"run_mode": run_mode, "poll_interval": poll_interval,
                                 "batch_deadline": batch_deadline, "budget_usd": budget_usd}
    workflow = load_workflow(ref, proj, **overrides)
    store = open_store(proj)
    try:
        # A run continued (R1) is compared with the file as loaded with the overrides
        # it was admitted with, not with today's: they belong to the run.
        return start_run(proj, store, workflow, RunOptions(**options), overrides=overrides,
                         reload=lambda o: load_workflow(ref, proj, **o))
    finally:
        store.close()


def retry(ref: str | Path, project: Project | Path | str | None = None, *,
          action: str | None = None, record: str | None = None, dry_run: bool = False,
          abandon_in_flight: bool = False, **options: Any) -> Any:
    """``agac retry`` (R2): re-ask the failed units of the latest final run.

    ``abandon_in_flight`` (B10): retry even though a batch of the workflow is still out;
    its waiting records fail ``batch_abandoned`` first.
    """
    from agac.engine.runs import RunOptions, start_retry

    proj = _project(project)
    workflow = load_workflow(ref, proj)
    store = open_store(proj)
    try:
        # A retry runs with the per-run settings (--run-mode, ...) of the run it retries.
        last = store.latest_run(workflow.name, final=True)
        overrides = (loads(last.options).get("overrides") or {}) if last is not None else {}
        if overrides:
            workflow = load_workflow(ref, proj, **overrides)
        run_options = RunOptions(**options)
        run_options.overrides = overrides
        return start_retry(proj, store, workflow, run_options, action, record, dry_run,
                           abandon_in_flight=abandon_in_flight)
    finally:
        store.close()


def plan(ref: str | Path, project: Project | Path | str | None = None, *,
         run_mode: str | None = None, budget_usd: float | None = None,
         limit: int | None = None) -> dict[str, Any]:
    """``agac plan``: what a new run would send and cost — units, requests, estimated
    tokens, cost online vs batch, answers already reusable (R5). Sends nothing and
    writes nothing."""
    from itertools import islice

    from agac.engine.plan import estimate_run, plan_records
    from agac.providers.pricing import PriceTable

    proj = _project(project)
    workflow = load_workflow(ref, proj, run_mode=run_mode, budget_usd=budget_usd)
    store = open_store(proj)
    try:
        records = plan_records(proj, workflow)
        if limit is not None:
            records = islice(records, limit)
        return estimate_run(proj, store, workflow, PriceTable(dict(proj.config.prices)), records)
    finally:
        store.close()


def cancel(ref: str, project: Project | Path | str | None = None) -> Any:
    """``agac cancel RUN|WF``: end a run ``cancelled`` — a run id, or a workflow's open run.

    Its batches out are cancelled at the provider (their records fail ``batch_cancelled``)
    and units never sent are skipped ``cancelled``. A run owned by a live process is marked
    ``cancelling`` and ended by its owner at its next heartbeat. Returns a
    :class:`agac.engine.runs.RunResult`."""
    from agac.engine.runs import cancel_run
    from agac.errors import RefusedError

    with _history_of(project) as (proj, store):
        run_row = store.get_run(ref)
        if run_row is None:
            name = _workflow_name(ref, proj)
            run_row = store.open_run(name)
            if run_row is None:
                raise RefusedError(f"{ref!r} is neither a run id nor a workflow with an open run; "
                                   "`agac runs list` shows the runs")
        return cancel_run(proj, store, run_row)


def effects_list(ref: str | None = None, project: Project | Path | str | None = None
                 ) -> list[dict[str, Any]]:
    """``agac effects list [WF]``: every recorded side effect (E1, E2), oldest first."""
    from agac.engine.effects import effect_dict

    with _history_of(project) as (proj, store):
        name = _workflow_name(ref, proj) if ref else None
        return [effect_dict(r) for r in store.list_effects(name)]


def effects_resolve(ref: str, done: bool, project: Project | Path | str | None = None
                    ) -> dict[str, Any]:
    """``agac effects resolve ID --done|--not-done``: settle an effect left ``unknown`` (E2)."""
    from agac.engine.effects import resolve_effect

    with _history_of(project) as (_proj, store):
        return resolve_effect(store, ref, done)


def effects_compensate(ref: str, project: Project | Path | str | None = None) -> dict[str, Any]:
    """``agac effects compensate ID``: run the declared compensation, once, on request."""
    from agac.engine.effects import compensate_effect

    with _history_of(project) as (proj, store):
        return compensate_effect(proj, store, ref)


def approvals_list(ref: str | None = None, project: Project | Path | str | None = None, *,
                   every: bool = False) -> list[dict[str, Any]]:
    """``agac approvals list [WF]``: proposals waiting for a decision (A1), oldest first;
    ``every``: in any state. Each has at least id, workflow, action, record, arguments,
    approvers, expires_at and state."""
    from agac.engine.decisions import list_proposals

    with _history_of(project) as (proj, store):
        return list_proposals(store, _workflow_name(ref, proj) if ref else None, every=every)


def approvals_show(ref: str, project: Project | Path | str | None = None) -> dict[str, Any]:
    """``agac approvals show ID``: one proposal, whether its signatures verify, its history."""
    from agac.engine.decisions import show_proposal

    with _history_of(project) as (proj, store):
        return show_proposal(proj, store, ref)


def approve(ref: str, project: Project | Path | str | None = None, *,
            who: str | None = None) -> dict[str, Any]:
    """``agac approve ID [--as WHO]`` (A2, A3): ``who`` defaults to ``AGAC_USER``. Refused
    (RefusedError, exit 2) when stale, replayed, expired, altered, or ``who`` is not an
    approver. Never needs the run's lease. With ``identity: login`` the decision is sent
    to the service (``AGAC_SERVER``, ``AGAC_TOKEN``) and ``who`` is refused."""
    from agac.engine.decisions import approve as _approve

    proj = _project(project)
    if proj.config.login:
        from agac.people.remote import send_decision

        return send_decision(ref, "approve", {}, who)
    with _history_of(proj) as (proj, store):
        return _approve(proj, store, ref, who)


def reject(ref: str, reason: str, project: Project | Path | str | None = None, *,
           who: str | None = None) -> dict[str, Any]:
    """``agac reject ID --reason TEXT [--as WHO]``: the unit fails ``approval_rejected``
    (or the run ends failed with ``on_reject: fail_run``). With ``identity: login``, sent
    to the service as :func:`approve` says."""
    from agac.engine.decisions import reject as _reject

    proj = _project(project)
    if proj.config.login:
        from agac.people.remote import send_decision

        return send_decision(ref, "reject", {"reason": reason}, who)
    with _history_of(proj) as (proj, store):
        return _reject(proj, store, ref, who, reason)


def revise(ref: str, changes: dict[str, Any] | list[str], project: Project | Path | str | None = None,
           *, who: str | None = None) -> dict[str, Any]:
    """``agac revise ID --set field=value … [--as WHO]``: a new proposal with the changed
    arguments, which needs its own approval; the old one becomes stale. ``changes`` is a
    mapping of dotted field to value, or ``field=value`` strings. With ``identity: login``,
    sent to the service as :func:`approve` says."""
    from agac.engine.decisions import parse_changes
    from agac.engine.decisions import revise as _revise

    proj = _project(project)
    parsed = parse_changes(changes) if isinstance(changes, list) else dict(changes)
    if proj.config.login:
        from agac.people.remote import send_decision

        return send_decision(ref, "revise", {"set": parsed}, who)
    with _history_of(proj) as (proj, store):
        return _revise(proj, store, ref, who, parsed)


def gc(keep_runs: int = 10, project: Project | Path | str | None = None) -> dict[str, Any]:
    """``agac gc``: prune the outcomes and events of all but the newest ``keep_runs`` final
    runs of each workflow; runs not final, answers, the cost ledger, batches and effects
    are kept."""
    from agac.engine.closing import collect_garbage

    if keep_runs < 1:
        raise UsageError("--keep-runs must be at least 1: the latest run is what the next one "
                         "builds on (R1, R2)")
    with _history_of(project) as (_proj, store):
        return collect_garbage(store, keep_runs)


def _workflow_name(ref: str, proj: Project) -> str:
    """The workflow name for ``ref`` (a name or a path), without requiring it to validate."""
    from agac.config.workflow import find_workflow

    try:
        path = find_workflow(ref, proj)
    except Exception:  # noqa: BLE001 - not a workflow reference: treat it as a name
        return ref
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        return str(data.get("name") or Path(path).stem)
    except Exception:  # noqa: BLE001
        return Path(path).stem


def resolve_run(store: Store, proj: Project, ref: str | None) -> Any:
    """A run from a run id (or unique prefix), a workflow name or path, or None (the latest)."""
    if ref is None:
        runs = store.list_runs(limit=1)
        if not runs:
            raise UsageError("no runs yet in this project's store; start one with `agac run WF`")
        return runs[0]
    run_row = store.get_run(ref)
    if run_row is not None:
        return run_row
    name = _workflow_name(ref, proj)
    run_row = store.latest_run(name)
    if run_row is None:
        raise UsageError(f"no run of {ref!r} in this project's store; start one with `agac run {ref}`")
    return run_row


def status(ref: str | None = None, project: Project | Path | str | None = None) -> dict[str, Any]:
    """The §7.1 summary of a run (by id) or of a workflow's latest run."""
    from agac.engine.summary import build_summary

    with _history_of(project) as (proj, store):
        run_row = resolve_run(store, proj, ref)
        if "pruned" in (loads(run_row.options) or {}):
            raise UsageError(f"run {run_row.id} was pruned by `agac gc`: its outcomes and events "
                             f"are gone (its cost stays in `agac cost {run_row.id}`)")
        summary = build_summary(store, run_row)
        if store.dialect == "postgresql" and store.has_shards(run_row.id):
            from agac.engine.workers import shard_view

            summary["shards"] = shard_view(store, run_row.id)
        return summary


def list_runs(ref: str | None = None, project: Project | Path | str | None = None,
              limit: int = 50) -> list[dict[str, Any]]:
    with _history_of(project) as (proj, store):
        name = _workflow_name(ref, proj) if ref else None
        return [
            {"run_id": r.id, "workflow": r.workflow, "state": r.state, "retry_of": r.retry_of,
             "created_at": r.created_at, "ended_at": r.ended_at}
            for r in store.list_runs(name, limit)
        ]


def events(run_ref: str | None, project: Project | Path | str | None = None, after: int = 0,
           ) -> list[dict[str, Any]]:
    with _history_of(project) as (proj, store):
        run_row = resolve_run(store, proj, run_ref)
        return [_event_dict(e) for e in store.iter_events(run_row.id, after, limit=100_000)]


def _event_dict(e: Any) -> dict[str, Any]:
    return {"id": e.id, "run_id": e.run_id, "kind": e.kind, "action": e.action,
            "unit_key": e.unit_key, "data": loads(e.data), "created_at": e.created_at}


def export_rows(ref: str, action: str, project: Project | Path | str | None = None,
                run_ref: str | None = None) -> Iterator[dict[str, Any]]:
    """One row per record of ``action`` in the run: key, status, reason, detail, output."""
    with _history_of(project) as (proj, store):
        run_row = resolve_run(store, proj, run_ref or ref)
        names = [a["name"] for a in loads(run_row.config)["actions"]]
        if action not in names:
            raise UsageError(f"run {run_row.id} has no action {action!r} (actions: {', '.join(names)})")
        for o in _in_item_order(store.iter_action_outcomes(run_row.id, action)):
            yield {"key": o.unit_key, "status": o.status, "reason": o.reason, "detail": o.detail,
                   "output": loads(o.output)}


def _item_path(key: str) -> tuple[int, ...]:
    """The indexes of a fan-out item key (``rec/3/10`` -> (3, 10)); () for a record."""
    parts = key.split("/")
    tail = []
    for part in reversed(parts[1:]):
        if not part.isdigit():
            break
        tail.append(int(part))
    return tuple(reversed(tail))


def _in_item_order(rows: Iterator[Any]) -> Iterator[Any]:
    """Rows in record order, the items of a record in request order (``r/2`` before
    ``r/10``; the store orders keys as text)."""
    group: list[Any] = []
    for row in rows:
        if group and row.seq != group[0].seq:
            yield from sorted(group, key=lambda r: _item_path(r.unit_key))
            group = []
        group.append(row)
    yield from sorted(group, key=lambda r: _item_path(r.unit_key))


def cost(ref: str | None = None, project: Project | Path | str | None = None) -> dict[str, Any]:
    """Cost per action and model, live vs batch, and what batch saved against all-live."""
    from agac.engine.summary import cost_breakdown
    from agac.providers.pricing import PriceTable

    with _history_of(project) as (proj, store):
        return cost_breakdown(store, resolve_run(store, proj, ref),
                              PriceTable(dict(proj.config.prices)))


def render(ref: str, record: str, action: str | None = None,
           project: Project | Path | str | None = None) -> list[dict[str, Any]]:
    """The exact requests the workflow would send for ``record``, before any money is spent."""
    from agac.engine.inspect import render_requests

    proj = _project(project)
    workflow = load_workflow(ref, proj)
    store = open_store(proj)
    try:
        return render_requests(proj, store, workflow, record, action)
    finally:
        store.close()


def list_records(ref: str, project: Project | Path | str | None = None, *,
                 status: str | None = None, action: str | None = None,
                 run_ref: str | None = None, limit: int = 10_000) -> dict[str, Any]:
    """The units of a workflow's latest run (or ``run_ref``) with ``status`` and in
    ``action`` — fan-out items included, by item key — for ``agac records show``. At most
    ``limit`` units, in record order; ``truncated`` says when there were more."""
    with _history_of(project) as (proj, store):
        run_row = resolve_run(store, proj, run_ref or ref)
        names = [a["name"] for a in loads(run_row.config)["actions"]]
        if action is not None and action not in names:
            raise UsageError(f"run {run_row.id} has no action {action!r} (actions: {', '.join(names)})")
        rows = store.find_outcomes(run_row.id, status=status, action=action, limit=limit + 1)
        truncated = len(rows) > limit
        rows = sorted(rows[:limit],
                      key=lambda r: (r.seq, _item_path(r.unit_key), names.index(r.action)))
        return {"run_id": run_row.id, "workflow": run_row.workflow, "status": status,
                "action": action, "truncated": truncated, "units": [
                    {"key": r.unit_key, "action": r.action, "status": r.status, "reason": r.reason,
                     "detail": r.detail, "attempts": r.attempts} for r in rows]}


def record_session(key: str, project: Project | Path | str | None = None, *,
                   workflow: str | None = None, run_ref: str | None = None) -> dict[str, Any]:
    """The record's session (DESIGN §11): its history across actions, attempts, tokens and
    cost, status and error log."""
    from agac.engine.inspect import session_document

    with _history_of(project) as (proj, store):
        return session_document(proj, store, key, workflow, run_ref)


# -- scale-out workers -----------------------------------------------------------------------


def submit(ref: str | Path, project: Project | Path | str | None = None, *,
           run_mode: str | None = None, poll_interval: float | str | None = None,
           batch_deadline: float | str | None = None, budget_usd: float | None = None,
           **options: Any) -> dict[str, Any]:
    """``agac submit``: admit a run (or continue the open one, R1) for workers to execute,
    without executing it: ``{"run_id", "workflow", "state", "records", "shards", "notes"}``.
    Options as :func:`run`: ``new``, ``fresh``, ``limit``, ``allow_over_estimate``."""
    from agac.engine.runs import RunOptions
    from agac.engine.workers import submit_run

    proj = _project(project)
    overrides: dict[str, Any] = {"run_mode": run_mode, "poll_interval": poll_interval,
                                 "batch_deadline": batch_deadline, "budget_usd": budget_usd}
    workflow = load_workflow(ref, proj, **overrides)
    store = open_store(proj)
    try:
        if store.dialect != "postgresql":
            raise UsageError("agac submit hands a run to workers, which need a PostgreSQL store; "
                             "set AGAC_STORE=postgresql://user@host:5432/db, or run it here with "
                             f"`agac run {workflow.name}`")
        return submit_run(proj, store, workflow, RunOptions(**options), overrides=overrides,
                          reload=lambda o: load_workflow(ref, proj, **o))
    finally:
        store.close()


def worker(project: Project | Path | str | None = None, *, concurrency: int = 4,
           lease_ttl: float = 30.0, poll: float = 5.0, exit_when_done: bool = False,
           handle_signals: bool = False, log: Any = None) -> Any:
    """``agac worker``: claim and advance shards of any open run until stopped (SIGTERM:
    finish or hand back what it holds). Refused (UsageError) on a SQLite store. Returns a
    :class:`agac.engine.workers.WorkerReport`."""
    from agac.engine.workers import Worker, WorkerOptions

    proj = _project(project)
    if store_url(proj) == "memory" or not store_url(proj).startswith("postgres"):
        raise UsageError(
            "agac worker needs a PostgreSQL store: workers coordinate through its row locks, "
            "leases and LISTEN/NOTIFY, which a SQLite file cannot share across machines; set "
            "AGAC_STORE=postgresql://user@host:5432/db (or `store:` in agac.yml), or run the "
            "workflow on this machine with `agac run`")
    store = open_store(proj)
    try:
        w = Worker(proj, store, WorkerOptions(concurrency=concurrency, lease_ttl=lease_ttl, poll=poll,
                                              exit_when_done=exit_when_done,
                                              handle_signals=handle_signals, log=log))
        return w.run()
    finally:
        store.close()


def workers(project: Project | Path | str | None = None, *, all_workers: bool = False,
            ) -> list[dict[str, Any]]:
    """``agac workers``: live workers (``all_workers``: also stopped ones), the shards each
    holds and its last heartbeat."""
    from agac.engine.workers import list_workers

    with _history_of(project) as (_proj, store):
        if store.dialect != "postgresql":
            return []
        return list_workers(store, include_stopped=all_workers)
