"""Reviewing a run's answers where people look (docs/tutorials/quality.md, Review in a browser):
one action's units as a table — filtered by status, reason and a failed check, searched,
paged in SQL — their download as CSV or parquet, a pilot's report and two runs compared,
for the service's pages (agac/service/review.py).

As every call of :mod:`agac.api.team`, each takes a long-lived store and the caller as a
:class:`Principal`; a run of another tenant is :class:`NotFound`.

The table's columns are the wide table's (:mod:`agac.data.results`) for one action, one
row per unit (an item of a fan-out is a row of its own): ``key``, the answer's fields
typed from the action's schema (``<action>.<field>``), ``<action>#status`` and
``<action>#reason``; then ``<action>#detail`` (the unit's message), one
``<action>.check.<name>`` per check (passed: true/false, empty when not judged) and
``<action>#cost_usd`` (the unit's calls in the ledger: attempts, repairs and judges).
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agac.api.results import check_names
from agac.api.team import MAX_PAGE, visible_run
from agac.data.results import ActionOutput, ResultTable, Unit
from agac.errors import UsageError
from agac.jsontext import loads
from agac.store.review import AnswerFilter

if TYPE_CHECKING:
    from agac.api.identity import Principal
    from agac.config.project import Project
    from agac.data.sampling import Sample
    from agac.store.repository import Store
    from agac.store.values import OutcomeRecord, RunRecord

__all__ = [
    "DOWNLOADS",
    "PER_PAGE",
    "AnswerFilter",
    "AnswerRow",
    "AnswerTable",
    "answer_download",
    "answer_table",
    "compare_download",
    "compare_view",
    "csv_chunks",
    "pilot_view",
]

PER_PAGE = 50
MAX_PER_PAGE = 500
DOWNLOADS = ("csv", "parquet")
STATUSES = ("answered", "failed", "skipped")
_COST_CHUNK = 500
_CSV_CHUNK = 2000


@dataclass(frozen=True)
class AnswerRow:
    """One unit as the table shows it: its key, status, reason, message, the answer's
    fields (``cells``, in the table's column order), each check's verdict, its cost, and
    where its answer came from (``reused``: an earlier run's, at no cost to this one)."""

    key: str
    status: str
    reason: str | None
    detail: str | None
    cells: tuple[Any, ...]
    checks: dict[str, bool]
    cost_usd: float
    origin: str


@dataclass(frozen=True)
class AnswerTable:
    """One page of an action's units that pass ``where``, and what the filters offer:
    units per status, per reason and per failed check (of the whole action)."""

    run: RunRecord
    action: str
    actions: tuple[str, ...]
    columns: tuple[str, ...]
    checks: tuple[str, ...]
    rows: tuple[AnswerRow, ...]
    where: AnswerFilter
    page: int
    per_page: int
    total: int
    statuses: dict[str, int]
    reasons: dict[str, int]
    failed_checks: dict[str, int]

    @property
    def pages(self) -> int:
        return max(math.ceil(self.total / self.per_page), 1)

    @property
    def pilot(self) -> bool:
        return self.run.settings.overrides.get("pilot") is not None


def answer_filter(
    status: str | None = None,
    reason: str | None = None,
    check: str | None = None,
    search: str | None = None,
) -> AnswerFilter:
    """A filter from a form's values (empty is no filter); UsageError for an unknown status."""
    if status and status not in STATUSES:
        raise UsageError(f"unknown status {status!r} (statuses: {', '.join(STATUSES)})")
    text = (search or "").strip()
    return AnswerFilter(status or None, reason or None, check or None, text or None)


def answer_table(
    store: Store,
    principal: Principal,
    ref: str,
    *,
    action: str | None = None,
    where: AnswerFilter | None = None,
    page: int = 1,
    per_page: int = PER_PAGE,
) -> AnswerTable:
    """One page of ``action``'s units (the run's first action when None) in a run the
    principal may see, filtered by ``where``, in record order."""
    run = visible_run(store, principal, ref)
    name, table = _action_table(run, action)
    if not 1 <= page <= MAX_PAGE or not 1 <= per_page <= MAX_PER_PAGE:
        raise UsageError(f"page is 1 to {MAX_PAGE:,} and per page 1 to {MAX_PER_PAGE}")
    where = where or AnswerFilter()
    units, total = store.answers_page(
        run.id, run.snapshot_id, name, where, offset=(page - 1) * per_page, limit=per_page
    )
    costs = store.unit_costs(run.id, name, [u.unit_key for u in units])
    statuses, reasons = _facets(store.reason_counts(run.id, name))
    checks = check_names(run).get(name, ())
    return AnswerTable(
        run=run,
        action=name,
        actions=tuple(run.action_names),
        columns=tuple(c.name for c in table.columns if c.role == "field"),
        checks=checks,
        rows=tuple(_row(table, name, u, costs.get(u.unit_key, 0.0)) for u in units),
        where=where,
        page=page,
        per_page=per_page,
        total=total,
        statuses=statuses,
        reasons=reasons,
        failed_checks=_failed_checks(store, run.id, name),
    )


def _action_table(run: RunRecord, action: str | None) -> tuple[str, ResultTable]:
    """The action's name and its one-action wide table (a row per unit)."""
    from agac.engine.graph import run_graph
    from agac.engine.views.results import action_outputs

    if run.settings.pruned is not None:
        raise UsageError(f"run {run.id} was pruned by `agac gc`: its answers are gone")
    outputs = action_outputs(run_graph(run))
    names = [o.name for o in outputs]
    name = action or (names[0] if names else "")
    found = [o for o in outputs if o.name == name]
    if not found:
        raise UsageError(f"run {run.id} has no action {name!r} (actions: {', '.join(names)})")
    return name, ResultTable([ActionOutput(name, found[0].schema, per_item=False)])


def _row(table: ResultTable, action: str, o: OutcomeRecord, cost: float) -> AnswerRow:
    output = None if o.output is None else loads(o.output)
    values = table.row(o.unit_key, {action: [Unit(o.unit_key, o.status, o.reason, output)]})
    return AnswerRow(
        key=o.unit_key,
        status=o.status,
        reason=o.reason,
        detail=o.detail,
        cells=tuple(values[1:-2]),  # between the key and the status and reason
        checks=dict(loads(o.checks)) if o.checks else {},
        cost_usd=round(cost, 6),
        origin=o.origin,
    )


def _facets(
    counts: Sequence[tuple[str, str | None, int]],
) -> tuple[dict[str, int], dict[str, int]]:
    statuses: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for status, reason, n in counts:
        statuses[status] = statuses.get(status, 0) + n
        if reason:
            reasons[reason] = reasons.get(reason, 0) + n
    return statuses, dict(sorted(reasons.items()))


def _failed_checks(store: Store, run_id: str, action: str) -> dict[str, int]:
    from agac.engine.report.checks import check_rates

    rates = check_rates(store, run_id).get(action, {})
    return {name: rate.failed for name, rate in rates.items()}


# -- downloads ----------------------------------------------------------------------------------


def answer_download(
    store: Store,
    principal: Principal,
    ref: str,
    format: Literal["csv", "parquet"],
    *,
    action: str | None = None,
    where: AnswerFilter | None = None,
) -> tuple[str, Iterator[bytes]]:
    """(file name, its bytes in pieces) of every unit of ``action`` that passes ``where``,
    as CSV (streamed from the store as it is sent; cells a spreadsheet would run
    neutralized) or parquet (typed columns, row groups of 20,000; needs pyarrow). The run
    and the action are checked before the first piece."""
    if format not in DOWNLOADS:
        raise UsageError(f"download as {' or '.join(DOWNLOADS)}, not {format!r}")
    run = visible_run(store, principal, ref)
    name, table = _action_table(run, action)
    checks = check_names(run).get(name, ())
    names = [*table.names, f"{name}#detail", *(f"{name}.check.{c}" for c in checks)]
    names.append(f"{name}#cost_usd")
    units = store.iter_answers(run.id, run.snapshot_id, name, where or AnswerFilter())
    rows = (
        _flat(table, name, o, cost, checks) for o, cost in _with_costs(store, run.id, name, units)
    )
    filename = f"{run.workflow}-{run.id[:12]}-{name}.{format}"
    if format == "csv":
        return filename, csv_chunks(names, rows)
    return filename, iter((_parquet(table, names, checks, rows),))


def _with_costs(
    store: Store, run_id: str, action: str, units: Iterable[OutcomeRecord]
) -> Iterator[tuple[OutcomeRecord, float]]:
    chunk: list[OutcomeRecord] = []
    for o in units:
        chunk.append(o)
        if len(chunk) >= _COST_CHUNK:
            yield from _priced(store, run_id, action, chunk)
            chunk = []
    yield from _priced(store, run_id, action, chunk)


def _priced(
    store: Store, run_id: str, action: str, chunk: list[OutcomeRecord]
) -> Iterator[tuple[OutcomeRecord, float]]:
    costs = store.unit_costs(run_id, action, [o.unit_key for o in chunk])
    for o in chunk:
        yield o, round(costs.get(o.unit_key, 0.0), 6)


def _flat(
    table: ResultTable, action: str, o: OutcomeRecord, cost: float, checks: Sequence[str]
) -> list[Any]:
    row = _row(table, action, o, cost)
    return [
        row.key,
        *row.cells,
        row.status,
        row.reason,
        row.detail,
        *(row.checks.get(c) for c in checks),
        row.cost_usd,
    ]


def csv_chunks(
    names: Sequence[str], rows: Iterable[Sequence[Any]], per: int = _CSV_CHUNK
) -> Iterator[bytes]:
    """The CSV of ``rows`` (``agac export``'s wide CSV: cells a spreadsheet would run
    neutralized) as UTF-8 pieces of at most ``per`` rows each, the header first: a download
    streams, never held whole."""
    from agac.data.export import write_wide_csv

    def text(chunk: Sequence[Sequence[Any]]) -> str:
        out = io.StringIO()
        write_wide_csv(names, chunk, out)
        return out.getvalue()

    header = text(())
    yield header.encode("utf-8")
    chunk: list[Sequence[Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= per:
            yield text(chunk)[len(header) :].encode("utf-8")
            chunk = []
    if chunk:
        yield text(chunk)[len(header) :].encode("utf-8")


def _parquet(
    table: ResultTable, names: Sequence[str], checks: Sequence[str], rows: Iterable[list[Any]]
) -> bytes:
    from agac.data.arrow import arrow_schema, record_batch, require

    pa = require("pyarrow")
    pq = require("pyarrow.parquet")
    schema = arrow_schema(table)
    schema = schema.append(pa.field(names[len(schema)], pa.string()))
    for name in names[len(schema) : len(schema) + len(checks)]:
        schema = schema.append(pa.field(name, pa.bool_()))
    schema = schema.append(pa.field(names[-1], pa.float64()))
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
        batch: list[list[Any]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= 20_000:
                writer.write_batch(record_batch(schema, batch))
                batch = []
        if batch or not writer.is_open:
            writer.write_batch(record_batch(schema, batch))
    return sink.getvalue()


# -- a pilot and a comparison -------------------------------------------------------------------


def pilot_view(
    store: Store,
    project: Project,
    principal: Principal,
    ref: str,
    *,
    labels: str | None = None,
    min_agreement: float = 0.8,
) -> dict[str, Any]:
    """The report of a pilot's run the principal may see (``agac pilot --json``'s), read
    again from the store; its projection needs the workflow's input as it was (the same
    sample drawn again), else ``projection`` is None and ``notes`` says why. ``labels``:
    a labels file of the project (agac/api/labels.py), whose agreement with the checks'
    verdicts is in ``calibration`` as ``agac pilot --labels`` reports it."""
    from agac.api.team import run_summary
    from agac.engine.views.pilot import pilot_report
    from agac.providers.pricing import PriceTable

    run = visible_run(store, principal, ref)
    settings = run.settings.overrides.get("pilot")
    if not isinstance(settings, dict):
        raise UsageError(f"run {run.id} is not a pilot (agac pilot WF --sample N starts one)")
    summary = run_summary(store, project, principal, run.id).status.summary
    sample, note = _sample_again(store, project, run, settings)
    prices = PriceTable(dict(project.config.prices))
    stratify, seed = settings.get("stratify"), int(settings.get("seed") or 0)
    if sample is None:
        sample = _sample_of_run(store, run)
    report = pilot_report(store, run, sample, prices, summary, stratify=stratify, seed=seed)
    report["notes"] = [note] if note else []
    if note:
        report["projection"] = None
    if labels:
        _calibrated(report, project, labels, min_agreement)
    return report


def _calibrated(
    report: dict[str, Any], project: Project, labels: str, min_agreement: float
) -> None:
    """The checks' agreement with a labels file of the project, added to ``report``; a
    file outside the project is refused (the service reads nothing else)."""
    from agac.api.labels import read_labels
    from agac.engine.views.pilot import calibration, uncalibrated_notes

    root = project.root.resolve()
    path = (root / labels).resolve()
    if not path.is_relative_to(root):
        raise UsageError(f"labels {labels!r}: name a file inside the project")
    expected = read_labels(path).checks
    report["labels"] = labels
    report["min_agreement"] = min_agreement
    report["calibration"] = calibration(report["answers"], expected, min_agreement)
    report["notes"] += uncalibrated_notes(report["calibration"], min_agreement, "sampled units")


def _sample_again(
    store: Store, project: Project, run: RunRecord, settings: dict[str, Any]
) -> tuple[Sample | None, str | None]:
    """The pilot's sample drawn again from the workflow's input (its strata and the size
    of the input are what the projection needs); None and why, when the input or the
    workflow is no longer what the pilot sampled."""
    from agac.api.workflows import load_workflow
    from agac.data.sampling import choose_sample
    from agac.engine.lifecycle.snapshots import input_source
    from agac.errors import AgacError

    why = "its projection is not shown: {}"
    try:
        loaded = load_workflow(project.root / run.workflow_path, project, pilot=settings)
        source = input_source(loaded, project)
        stratify = settings.get("stratify")
        items = _strata(source.records(loaded.input.id_field), stratify)
        chosen = choose_sample(items, int(settings["sample"]), int(settings.get("seed") or 0))
    except (AgacError, OSError) as exc:
        return None, why.format(f"the workflow or its input cannot be read now ({exc})")
    info = store.snapshot_info(run.snapshot_id)
    sampled = {r.key for r in store.iter_records(run.snapshot_id)} if info is not None else set()
    if sampled != set(chosen.keys):
        return None, why.format("the input changed since the pilot drew its sample")
    return chosen, None


def _strata(records: Iterable[Any], field: str | None) -> Iterator[tuple[str, str]]:
    from agac.data.sampling import stratum_of

    for rec in records:
        if rec.reason is None and rec.payload is not None:
            yield rec.key, stratum_of(rec.payload, field)


def _sample_of_run(store: Store, run: RunRecord) -> Sample:
    """The pilot's records as its own sample (no input size known: the projection is
    left out by the caller)."""
    from agac.data.sampling import Sample

    keys = frozenset(r.key for r in store.iter_records(run.snapshot_id))
    return Sample(keys, {"": (len(keys), len(keys))}, len(keys), dict.fromkeys(keys, ""))


def compare_view(
    store: Store,
    project: Project,
    principal: Principal,
    run_a: str,
    run_b: str,
    *,
    action: str | None = None,
    limit: int = 50,
    judge: tuple[str, str | None] | None = None,
    variants: str | None = None,
) -> dict[str, Any]:
    """``agac compare RUN_A RUN_B --json`` of two runs the principal may see — or, with
    ``variants`` (``A,B``, or empty for the primary and the next), ``agac compare RUN_A
    --variants`` of two variants of an action of run A; ``judge`` (``provider/model``,
    criteria) adds the pairwise judge's verdicts (asked once, stored: asking again costs
    nothing)."""
    from agac.api.compare import compare, compare_variants, variant_pair

    a = visible_run(store, principal, run_a)
    model, criteria = judge if judge is not None else (None, None)
    if variants is not None:
        doc = compare_variants(
            a.id,
            project,
            action=action,
            variants=variant_pair(variants),
            limit=limit,
            judge=model,
            criteria=criteria,
            principal=principal,
            store=store,
        )
        doc["runs"]["a"]["pilot"] = doc["runs"]["b"]["pilot"] = False
        return doc
    b = visible_run(store, principal, run_b)
    doc = compare(
        a.id,
        b.id,
        project,
        action=action,
        limit=limit,
        judge=model,
        criteria=criteria,
        principal=principal,
        store=store,
    )
    doc["runs"]["a"]["pilot"] = a.settings.overrides.get("pilot") is not None
    doc["runs"]["b"]["pilot"] = b.settings.overrides.get("pilot") is not None
    return doc


def compare_download(
    store: Store,
    principal: Principal,
    run_a: str,
    run_b: str,
    *,
    action: str | None = None,
    variants: str | None = None,
) -> tuple[str, Iterator[bytes]]:
    """(file name, CSV in pieces) of every row that differs between two runs the principal may see
    (or two variants of an action of run A, as :func:`compare_view`):
    ``agac compare --out changed.csv``'s columns (``action``, ``key``, each run's status,
    reason and answer, the fields that changed), cells a spreadsheet would run neutralized."""
    from agac.api.compare import variant_pair
    from agac.engine.views.compare import Side, diff_rows, sides

    run = visible_run(store, principal, run_a)
    if variants is not None:
        action, a, b = sides(run, action, variant_pair(variants))
        name = f"compare-{run.id[:12]}-{a.variant}-{b.variant}.csv"
    else:
        other = visible_run(store, principal, run_b)
        if run.id == other.id:
            raise UsageError(f"{run_a!r} and {run_b!r} are the same run ({run.id}): name two runs")
        a, b = Side(run), Side(other)
        name = f"compare-{run.id[:12]}-{other.id[:12]}.csv"
    names = ["action", "key"]
    names += [f"{side}.{part}" for side in "ab" for part in ("status", "reason", "output")]
    rows = (
        [row["action"], row["key"], *_side(row["a"]), *_side(row["b"]), " ".join(row["fields"])]
        for row in diff_rows(store, a, b, action)
    )
    return name, csv_chunks([*names, "fields"], rows)


def _side(side: dict[str, Any] | None) -> list[Any]:
    if side is None:
        return [None, None, None]
    return [side["status"], side["reason"], side["output"]]
