"""``agac retry`` (R2): a new run with ``retry_of`` the latest final run, over the same
input snapshot, keeping the original's remaining budget, its deadline and its effect
receipts. It re-asks the named failed units (default: every failed unit) and every unit
downstream that was skipped because of them — for a fan-out item, also the join of each
enclosing parent and what follows it; all other outcomes are carried over."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agac.engine.batch.hybrid import CANCEL_DONE
from agac.engine.batch.manual import abandon_batches
from agac.engine.graph import RunGraph, run_graph
from agac.engine.lifecycle.admission import admit_run
from agac.engine.lifecycle.runs import execute_run, no_running_loop
from agac.engine.lifecycle.snapshots import InputSnapshot
from agac.errors import RefusedError, UsageError
from agac.jsontext import loads
from agac.keys import unit_key_of

if TYPE_CHECKING:
    from agac.config.model import Workflow
    from agac.config.project import Project
    from agac.engine.lifecycle.options import RunOptions, RunResult
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["rejoin_targets", "retry_targets", "start_retry"]


def retry_targets(
    store: Store,
    original: RunRecord,
    action: str | None,
    record: str | None,
    include_outstanding: bool = False,
) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(failed units to re-ask, downstream units skipped because of them). With
    ``include_outstanding`` the units left waiting on abandoned batches are re-asked too."""
    graph = run_graph(original)
    descendants = graph.descendants
    rows = store.failed_units(original.id, with_outstanding=include_outstanding)
    # ``record``: a record key as in the input, or a unit key as agac shows it (agac/keys.py)
    unit = (
        None
        if record is None
        else unit_key_of(record, lambda k: store.find_record(original.snapshot_id, k) is not None)
    )
    targets = {
        (row.action, row.unit_key)
        for row in rows
        if (action is None or row.action == action)
        and (unit is None or row.unit_key == unit or row.unit_key.startswith(unit + "/"))
    }
    keys = {k for _, k in targets}
    downstream: set[tuple[str, str]] = set()
    if keys:
        for key in keys:
            for o in store.unit_outcomes(original.id, key):
                if (
                    o.status == "skipped"
                    and o.reason in ("upstream_failed", "batch_outstanding")
                    and any(o.action in descendants[a] for a, k in targets if k == key)
                ):
                    downstream.add((o.action, key))
        seqs = {(row.action, row.unit_key): row.seq for row in rows}
        downstream |= rejoin_targets(store, original.id, graph, targets, seqs)
    return targets, downstream


def start_retry(
    project: Project,
    store: Store,
    workflow: Workflow,
    options: RunOptions,
    action: str | None,
    record: str | None,
    dry_run: bool,
    abandon_in_flight: bool = False,
) -> RunResult | dict[str, Any]:
    """``agac retry`` (R2): a new run with ``retry_of`` over the same input snapshot."""
    if not dry_run:
        no_running_loop()
    tenant = options.tenant
    open_run = store.open_run(workflow.name, tenant=tenant)
    if open_run is not None:
        raise RefusedError(
            f"run {open_run.id} of {workflow.name} is not finished; finish it with "
            f"`agac run {workflow.name}` before retrying"
        )
    out = [  # B13: a batch cancelled to go live holds no record; the retry's run reads it
        b
        for b in store.list_batches(workflow.name, tenants=(tenant,), open_only=True)
        if b.meta.get("hybrid") != CANCEL_DONE
    ]
    if out and not abandon_in_flight:
        names = ", ".join(f"{b.provider_batch_id or b.key} ({b.file})" for b in out)
        raise RefusedError(
            f"batches of {workflow.name} are still out: {names}; `agac run {workflow.name}` "
            "collects them, or use --abandon-in-flight if the provider no longer has them (B10)"
        )
    original = store.latest_run(workflow.name, tenant=tenant, final=True)
    if original is None:
        raise RefusedError(f"{workflow.name} has no finished run to retry; run it with `agac run`")
    if action is not None and action not in workflow.action_names:
        raise UsageError(f"{workflow.name} has no action {action!r}")
    notes: list[str] = []
    if out and abandon_in_flight and not dry_run:
        notes = abandon_batches(
            project,
            store,
            workflow.name,
            "abandoned by agac retry --abandon-in-flight",
            tenant=tenant,
        )
    targets, downstream = retry_targets(
        store, original, action, record, include_outstanding=abandon_in_flight
    )
    if dry_run:
        return {
            "retry_of": original.id,
            "workflow": workflow.name,
            "units": sorted(
                [{"action": a, "key": k} for a, k in targets], key=lambda d: (d["action"], d["key"])
            ),
            "downstream": len(downstream),
        }
    if not targets:
        raise RefusedError(
            f"run {original.id} of {workflow.name} has no failed units to retry"
            + (" matching the filter" if action or record else "")
        )
    info = store.snapshot_info(original.snapshot_id)
    assert info is not None
    snapshot = InputSnapshot(original.snapshot_id, loads(info.files), info.record_count)
    run = admit_run(project, store, workflow, options, retry_of=original.id, snapshot=snapshot)
    store.copy_outcomes(original.id, run.id, targets | downstream)
    notes.append(f"retrying {len(targets)} failed units of run {original.id}")
    return execute_run(project, store, run, options, notes, admitted=True)


def rejoin_targets(
    store: Store,
    run_id: str,
    graph: RunGraph,
    targets: set[tuple[str, str]],
    seqs: dict[tuple[str, str], int],
) -> set[tuple[str, str]]:
    """R2 for items: when an item is asked again, the join of its parent (and, nested, of
    every enclosing parent) is asked again, with every action downstream of that join at
    its level — they consumed the item's old outcome."""
    regions, descendants = graph.regions, graph.descendants
    if regions is None:
        return set()
    out: set[tuple[str, str]] = set()
    for action, key in targets:
        seq = seqs.get((action, key))
        expansions = store.fanouts_between(run_id, seq, seq + 1) if seq is not None else {}
        scope = regions.scope.get(action, ())
        k = key
        for depth in range(len(scope) - 1, -1, -1):
            fan = scope[depth]
            parent, _, index = k.rpartition("/")
            if not (index.isdigit() and (fan, parent) in expansions):
                continue  # the parent never fanned out: its units share its key
            for join, of in regions.joins.items():
                if of != fan:
                    continue
                out.add((join, parent))
                out.update(
                    (x, parent)
                    for x in descendants[join]
                    if regions.scope.get(x, ()) == scope[:depth]
                )
            k = parent
    return out
