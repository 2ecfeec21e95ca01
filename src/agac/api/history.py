"""Reading what runs did: status (§7.1), runs, events, exported outcomes, records and
their sessions, cost. Read-only; refused on ``store: memory``, which keeps nothing.

Every call reads the runs of its caller's tenants only (``tenant``, ``principal``: see
:mod:`agac.api.projects`); another tenant's run is not found. Each result names the
run's tenant."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, reading, resolve_run, scope_of, workflow_name
from agac.config.project import Project, store_source, store_url
from agac.config.websearch import searches_in_loop
from agac.errors import NotFound, UsageError
from agac.jsontext import loads
from agac.keys import ESCAPED_KEYS, unescape
from agac.store.values import FINAL_STATES

OWNED_STATES = ("running", "cancelling")
"""States in which a process is expected to hold the run's lease (``status`` says when
none does)."""

if TYPE_CHECKING:
    from agac.api.projects import Principal
    from agac.engine.report.cost import CostReport
    from agac.engine.report.status import StatusReport, StoreRead
    from agac.store.repository import Store

__all__ = [
    "FINAL_STATES",
    "cost",
    "events",
    "export_rows",
    "is_final",
    "list_records",
    "list_runs",
    "record_session",
    "status",
    "store_read",
]


def is_final(state: str) -> bool:
    """Whether a run in ``state`` has ended for good."""
    return state in FINAL_STATES


def status(
    ref: str | None = None,
    project: ProjectRef = None,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> StatusReport:
    """The §7.1 summary of a run (by id) or of a workflow's latest run, with its tenant;
    the store read (when no ``store`` handle was given) and, for a run workers share, its
    shards. A typed value that also reads as its JSON (``status(...)["state"]``)."""
    from agac.engine.report.run import build_summary
    from agac.engine.report.status import RunProcess, ShardRow, StatusReport

    with reading(project, store) as (proj, st):
        read = store_read(proj) if store is None else None
        try:
            run_row = resolve_run(st, proj, ref, scope_of(proj, tenant, principal))
        except NotFound as exc:
            if read is None:
                raise
            raise NotFound(f"{exc} (read the store {read.url}, {_said(read)})") from None
        if run_row.settings.pruned is not None:
            raise UsageError(
                f"run {run_row.id} was pruned by `agac gc`: its outcomes and events "
                f"are gone (its cost stays in `agac cost {run_row.id}`)"
            )
        process = None
        if run_row.state in OWNED_STATES and not st.has_shards(run_row.id):
            from agac.engine.lifecycle.leases import run_process

            process = RunProcess(**run_process(st, run_row.id))
        shards: tuple[ShardRow, ...] = ()
        if st.shares_work and st.has_shards(run_row.id):
            from agac.engine.workers.fleet import shard_view

            shards = tuple(ShardRow(**s) for s in shard_view(st, run_row.id))
        return StatusReport(build_summary(st, run_row), process, read, shards)


def store_read(proj: Project) -> StoreRead:
    """The store a command reads (``url`` as a message may show it, any password hidden)
    and where that came from (``source``: ``AGAC_STORE``, ``agac.yml`` or ``default``)."""
    from agac.engine.report.status import StoreRead
    from agac.store.database import display_url

    return StoreRead(display_url(store_url(proj)), store_source(proj))


def _said(read: StoreRead) -> str:
    if read.source == "AGAC_STORE":
        return "named by AGAC_STORE"
    if read.source == "agac.yml":
        return "named by store: in agac.yml"
    return "the default: neither AGAC_STORE nor store: in agac.yml is set"


def list_runs(
    ref: str | None = None,
    project: ProjectRef = None,
    limit: int = 50,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> list[dict[str, Any]]:
    """The runs of workflow ``ref`` (of the project without one) in the caller's
    tenants, newest first."""
    with reading(project, store) as (proj, st):
        scope = scope_of(proj, tenant, principal)
        name = workflow_name(ref, proj) if ref else None
        return [
            {
                "run_id": r.id,
                "workflow": r.workflow,
                "tenant": r.tenant,
                "state": r.state,
                "retry_of": r.retry_of,
                "created_at": r.created_at,
                "ended_at": r.ended_at,
            }
            for r in st.list_runs(name, limit, tenants=scope.visible)
        ]


def events(
    run_ref: str | None,
    project: ProjectRef = None,
    after: int = 0,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> list[dict[str, Any]]:
    """A run's events after id ``after``, in order; each names the run's tenant."""
    with reading(project, store) as (proj, st):
        run_row = resolve_run(st, proj, run_ref, scope_of(proj, tenant, principal))
        return [
            _event_dict(e, run_row.tenant) for e in st.iter_events(run_row.id, after, limit=100_000)
        ]


def _event_dict(e: Any, tenant: str) -> dict[str, Any]:
    return {
        "id": e.id,
        "run_id": e.run_id,
        "tenant": tenant,
        "kind": e.kind,
        "action": e.action,
        "unit_key": e.unit_key,
        "data": loads(e.data),
        "created_at": e.created_at,
    }


def export_rows(
    ref: str,
    action: str,
    project: ProjectRef = None,
    run_ref: str | None = None,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> Iterator[dict[str, Any]]:
    """One row per record of ``action`` in the run: key, status, reason, detail, output,
    the run's tenant, and each check's verdict (``checks``: name → passed, None for an
    action without checks); for an action with tools, its loop's ``turns`` (model turns,
    the final answer included) and ``tool_calls``; for an action with web search, the
    answer's ``citations`` (each ``url``, ``title``, ``cited_text``)."""
    with reading(project, store) as (proj, st):
        run_row = resolve_run(st, proj, run_ref or ref, scope_of(proj, tenant, principal))
        names = run_row.action_names
        if action not in names:
            raise UsageError(
                f"run {run_row.id} has no action {action!r} (actions: {', '.join(names)})"
            )
        escaped = run_row.settings.unit_keys == ESCAPED_KEYS
        loops = st.turn_counts(run_row.id) if action in tool_actions(run_row.config) else None
        searches = action in search_actions(run_row.config)
        for o in _in_item_order(st.iter_action_outcomes(run_row.id, action)):
            row = {
                "key": _shown_key(o.unit_key, escaped),
                "status": o.status,
                "reason": o.reason,
                "detail": o.detail,
                "output": loads(o.output),
                "tenant": run_row.tenant,
                "checks": None if o.checks is None else loads(o.checks),
            }
            if loops is not None:
                asked, calls = loops.get((action, o.unit_key), (0, 0))
                # the answer ended the loop: asked here, or after turns carried here
                final = o.status == "answered" and (o.origin == "call" or asked > 0)
                row.update(turns=asked + (1 if final else 0), tool_calls=calls)
            if searches:
                row["citations"] = _citations(st, o, run_row.tenant)
            yield row


def _citations(st: Store, o: Any, tenant: str) -> list[dict[str, Any]]:
    """The sources a unit's answer cites (its stored response's), [] when none."""
    if not o.fingerprint or o.status != "answered":
        return []
    found = st.get_answer(o.fingerprint, tenant=tenant)
    if found is None:
        return []
    response = loads(found.response)
    return list(response.get("citations") or ()) if isinstance(response, dict) else []


def search_actions(config: dict[str, Any]) -> frozenset[str]:
    """The actions of a run's stored config that offer the provider's web search."""
    return frozenset(
        str(a["name"]) for a in config.get("actions") or () if a.get("web_search") is not None
    )


def tool_actions(config: dict[str, Any]) -> frozenset[str]:
    """The actions of a run's stored config that have tools, or a web search agac runs
    (a loop of turns per unit)."""
    return frozenset(
        str(a["name"])
        for a in config.get("actions") or ()
        if a.get("tools") or (a.get("web_search") is not None and searches_in_loop(_provider(a)))
    )


def _provider(action: dict[str, Any]) -> str:
    return str(action.get("provider") or str(action.get("model") or "").partition("/")[0])


def _shown_key(unit_key: str, escaped: bool) -> str:
    """A record's unit as its key reads in the input (and in the wide export); a fan-out
    item as its unit key, ``<record key escaped>/<i>``, which no record key can be."""
    return unescape(unit_key) if escaped and "/" not in unit_key else unit_key


def _item_path(key: str) -> tuple[int, ...]:
    """The indexes of a fan-out item key (``rec/3/10`` -> (3, 10)); () for a record."""
    from agac.keys import item_path

    return item_path(key)


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


def cost(
    ref: str | None = None,
    project: ProjectRef = None,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> CostReport:
    """Cost per action and model, live vs batch, what batch saved against all-live and
    what prompt caching saved against the same tokens uncached, of a run of the caller's
    tenants. A typed value that also reads as its JSON (``cost(...)["rows"]``)."""
    from agac.engine.report.cost import cost_breakdown
    from agac.providers.pricing import PriceTable

    with reading(project, store) as (proj, st):
        run_row = resolve_run(st, proj, ref, scope_of(proj, tenant, principal))
        return cost_breakdown(st, run_row, PriceTable(dict(proj.config.prices)))


def list_records(
    ref: str,
    project: ProjectRef = None,
    *,
    status: str | None = None,
    action: str | None = None,
    run_ref: str | None = None,
    limit: int = 10_000,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """The units of a workflow's latest run (or ``run_ref``) with ``status`` and in
    ``action`` — fan-out items included, by item key — for ``agac records show``. At most
    ``limit`` units, in record order; ``truncated`` says when there were more."""
    with reading(project, store) as (proj, st):
        run_row = resolve_run(st, proj, run_ref or ref, scope_of(proj, tenant, principal))
        names = run_row.action_names
        if action is not None and action not in names:
            raise UsageError(
                f"run {run_row.id} has no action {action!r} (actions: {', '.join(names)})"
            )
        rows = st.find_outcomes(run_row.id, status=status, action=action, limit=limit + 1)
        truncated = len(rows) > limit
        rows = sorted(
            rows[:limit], key=lambda r: (r.seq, _item_path(r.unit_key), names.index(r.action))
        )
        return {
            "run_id": run_row.id,
            "workflow": run_row.workflow,
            "tenant": run_row.tenant,
            "status": status,
            "action": action,
            "truncated": truncated,
            "units": [
                {
                    "key": r.unit_key,
                    "action": r.action,
                    "status": r.status,
                    "reason": r.reason,
                    "detail": r.detail,
                    "attempts": r.attempts,
                }
                for r in rows
            ],
        }


def record_session(
    key: str,
    project: ProjectRef = None,
    *,
    workflow: str | None = None,
    run_ref: str | None = None,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """The record's session (docs/workflow-reference.md, Fan-out and join) in a run of the caller's tenants: its history
    across actions, attempts, tokens and cost, status and error log."""
    from agac.engine.views.sessions import session_document

    with reading(project, store) as (proj, st):
        name = workflow_name(workflow, proj) if workflow else None
        return session_document(
            proj, st, key, name, run_ref, tenants=scope_of(proj, tenant, principal).visible
        )
