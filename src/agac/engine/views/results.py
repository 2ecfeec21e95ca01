"""A run's results as the wide table (docs/python.md), read from the store in record order.

The layout is :mod:`agac.data.results`'; this module reads a run's input snapshot and
outcomes a range of records at a time (never the whole run at once) and hands back row
groups, for ``agac.results`` and for ``agac export --format parquet|--all-actions``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from agac.config.fanout import JOIN_OUTPUT_SCHEMA
from agac.data.columns import ColumnType, Sketch
from agac.data.results import ActionOutput, ResultTable, Unit
from agac.engine.graph import RunGraph, run_graph
from agac.errors import UsageError
from agac.jsontext import loads

if TYPE_CHECKING:
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["ROW_GROUP", "action_outputs", "result_row_groups", "result_table", "source_type"]

ROW_GROUP = 20_000
"""Records per row group: a parquet row group, and what is held in memory at once."""
_READ = 2_000
"""Records read from the store per query."""

TEXT_OUTPUT: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}}
"""What an llm answer without a schema is (docs/workflow-reference.md)."""


def action_outputs(graph: RunGraph) -> list[ActionOutput]:
    """Each action of a run's graph with the schema of its output and whether it runs once
    per fan-out item."""
    regions = graph.regions
    out = []
    for a in graph.actions:
        schema = a.schema
        if a.kind == "llm" and schema is None:
            schema = TEXT_OUTPUT
        elif a.kind == "join":
            schema = JOIN_OUTPUT_SCHEMA
        per_item = regions is not None and regions.per_item(a.name)
        out.append(ActionOutput(a.name, schema, per_item, a.web_search is not None))
    return out


def result_table(
    store: Store, run: RunRecord, action: str | None = None, *, include_source: bool = False
) -> ResultTable:
    """The table of ``run`` (every action, or only ``action``), with its source fields
    when ``include_source`` (typed by one pass over the snapshot's records)."""
    if run.settings.pruned is not None:
        raise UsageError(
            f"run {run.id} was pruned by `agac gc`: its outcomes are gone (its "
            f"cost stays in `agac cost {run.id}`)"
        )
    outputs = action_outputs(run_graph(run))
    if action is not None:
        names = [o.name for o in outputs]
        if action not in names:
            raise UsageError(f"run {run.id} has no action {action!r} (actions: {', '.join(names)})")
        outputs = [o for o in outputs if o.name == action]
    return ResultTable(outputs, source_type(store, run.snapshot_id) if include_source else None)


def source_type(store: Store, snapshot_id: str) -> ColumnType:
    """The type of the snapshot's records, from every value (invalid records hold none)."""
    sketch = Sketch()
    for record in store.iter_records(snapshot_id):
        if record.payload is not None and record.reason is None:
            sketch.add(loads(record.payload))
    return sketch.column_type()


def result_row_groups(
    store: Store,
    run: RunRecord,
    table: ResultTable,
    *,
    json_text: bool = True,
    rows_per_group: int = ROW_GROUP,
) -> Iterator[list[list[Any]]]:
    """The table's rows in record order, ``rows_per_group`` at a time."""
    info = store.snapshot_info(run.snapshot_id)
    total = info.record_count if info is not None else 0
    wanted = {a.name for a in table.actions}
    source = any(c.role == "source" for c in table.columns)
    group: list[list[Any]] = []
    for lo in range(0, total, _READ):
        records, outcomes = store.results_between(
            run.id, run.snapshot_id, lo, min(lo + _READ, total), payloads=source
        )
        units = _units_by_seq(outcomes, wanted, _citations(store, run, table, outcomes))
        for record in records:
            payload = (
                loads(record.payload)
                if source and record.payload is not None and record.reason is None
                else None
            )
            group.append(
                table.row(record.key, units.get(record.seq, _NONE), payload, json_text=json_text)
            )
            if len(group) >= rows_per_group:
                yield group
                group = []
    if group:
        yield group


_NONE: dict[str, list[Unit]] = {}


def _citations(
    store: Store, run: RunRecord, table: ResultTable, rows: Sequence[Any]
) -> dict[str, Any]:
    """fingerprint -> the citations of its stored answer, for the answered units of the
    table's actions with web search (one read per range of records)."""
    cited = {a.name for a in table.actions if a.citations}
    if not cited:
        return {}
    fps = sorted({r.fingerprint for r in rows if r.action in cited and r.fingerprint})
    responses = store.get_answers(fps, tenant=run.tenant, part="response")
    return {fp: loads(text).get("citations") or [] for fp, text in responses.items()}


def _units_by_seq(
    rows: Sequence[Any], wanted: set[str], citations: dict[str, Any]
) -> dict[int, dict[str, list[Unit]]]:
    out: dict[int, dict[str, list[Unit]]] = {}
    for seq, action, key, status, reason, output, fingerprint in rows:
        if action not in wanted:
            continue
        cited = citations.get(fingerprint) if status == "answered" and fingerprint else None
        unit = Unit(key, status, reason, None if output is None else loads(output), cited)
        by_action = out.get(seq)
        if by_action is None:
            by_action = out[seq] = {}
        found = by_action.get(action)
        if found is None:
            by_action[action] = [unit]
        else:
            found.append(unit)
    return out
