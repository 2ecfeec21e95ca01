"""``agac compare RUN_A RUN_B``: two runs over the same records, side by side (docs/cli.md,
agac compare): agreement per field, the rows that changed, enum distributions, numeric
deltas, check pass rates and cost per run (engine/views/compare.py)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.api.labels import Labels, read_labels
from agac.api.projects import ProjectRef, reading, resolve_run, scope_of
from agac.errors import UsageError

if TYPE_CHECKING:
    from agac.api.projects import Principal
    from agac.config.project import Project
    from agac.engine.views.compare import Side
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["compare", "compare_variants", "variant_pair"]


def compare(
    run_a: str,
    run_b: str,
    project: ProjectRef = None,
    *,
    action: str | None = None,
    limit: int = 20,
    out: str | Path | None = None,
    judge: str | None = None,
    criteria: str | None = None,
    labels: str | Path | None = None,
    min_agreement: float = 0.8,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """``agac compare``: run ``run_a`` against run ``run_b`` (each a run id, or a workflow
    for its latest run) in the caller's tenants. Returns ``runs`` (per run: models, calls,
    tokens, cost, check pass rates) and ``actions`` (per action both runs have, or only
    ``action``: units, status changes, agreement per field, enum distributions, numeric
    deltas, and the first ``limit`` changed rows), and ``notes`` (warnings). ``out`` writes every changed row to a
    ``.csv``, ``.jsonl`` or ``.json`` file (then ``out`` in the result).

    ``judge`` (``provider/model``) asks a pairwise judge, both orders of each pair of
    differing answers (``criteria``: what makes an answer better), and adds ``pairwise``
    per action: wins, ties and B's win rate with its 95 % interval; its calls go in run
    B's ledger (origin ``pairwise``) and its verdicts are stored, so none is paid twice
    (engine/pairwise.py).

    ``labels`` names a file of expected verdicts (agac/api/labels.py): ``calibration``
    then says, per run, action and check, how the check's verdicts agree with them, and
    each action's ``pairwise`` how the pairwise judge's preferences agree with a
    ``pairwise`` column (a, b or tie); ``notes`` warns ``judge_uncalibrated`` below
    ``min_agreement``."""
    from agac.engine.views.compare import Side, compare_runs
    from agac.providers.pricing import PriceTable

    target = _out_path(out)
    expected = read_labels(Path(labels)) if labels is not None else None
    with reading(project, store, writes=judge is not None) as (proj, st):
        scope = scope_of(proj, tenant, principal)
        a = resolve_run(st, proj, run_a, scope)
        b = resolve_run(st, proj, run_b, scope)
        if a.id == b.id:
            raise UsageError(
                f"{run_a!r} and {run_b!r} are the same run ({a.id}): name two runs, "
                "or compare its variants (--variants)"
            )
        doc = compare_runs(
            st, a, b, PriceTable(dict(proj.config.prices)), action=action, limit=limit
        )
        asked = _Asked(target, judge, criteria, expected, min_agreement)
        _finish(doc, proj, st, Side(a), Side(b), action, asked)
    return doc


def compare_variants(
    run: str,
    project: ProjectRef = None,
    *,
    action: str | None = None,
    variants: tuple[str, str] | None = None,
    limit: int = 20,
    out: str | Path | None = None,
    judge: str | None = None,
    criteria: str | None = None,
    labels: str | Path | None = None,
    min_agreement: float = 0.8,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """``agac compare RUN --variants``: two variants of an action of ``run`` (a run id, or
    a workflow for its latest run) compared as :func:`compare` compares two runs —
    ``action`` (None: the run's one action with ``variants:``) and ``variants`` (None: its
    primary and the next one). The result has the same shape, with ``variants`` (the
    action and the two variants) and, under ``runs``, each variant's ``variant``,
    ``action`` (the action that runs it), models, calls, tokens, cost and check pass
    rates. ``out``, ``judge`` (its calls in the run's ledger), ``labels`` as for
    :func:`compare`."""
    from agac.engine.views.compare import compare_variants as compare_them
    from agac.providers.pricing import PriceTable

    target = _out_path(out)
    expected = read_labels(Path(labels)) if labels is not None else None
    with reading(project, store, writes=judge is not None) as (proj, st):
        found = resolve_run(st, proj, run, scope_of(proj, tenant, principal))
        doc = compare_them(
            st,
            found,
            PriceTable(dict(proj.config.prices)),
            action=action,
            variants=variants,
            limit=limit,
        )
        a, b = _variant_sides(found, doc["variants"])
        asked = _Asked(target, judge, criteria, expected, min_agreement)
        _finish(doc, proj, st, a, b, doc["variants"]["action"], asked)
    return doc


def variant_pair(text: str) -> tuple[str, str] | None:
    """``A,B`` -> (A, B); empty (or ``*``) -> None: the primary and the next."""
    text = text.strip()
    if not text or text == "*":
        return None
    names = [n.strip() for n in text.split(",")]
    if len(names) != 2 or not all(names):
        raise UsageError(f"variants {text!r}: name two variants, as A,B")
    return names[0], names[1]


@dataclass(frozen=True)
class _Asked:
    """What a comparison is asked besides itself: a file of its rows, a pairwise judge,
    labels to calibrate against."""

    target: Path | None
    judge: str | None
    criteria: str | None
    expected: Labels | None
    min_agreement: float


def _variant_sides(run: RunRecord, chosen: dict[str, Any]) -> tuple[Side, Side]:
    from agac.engine.views.compare import sides

    _, a, b = sides(run, chosen["action"], (chosen["a"], chosen["b"]))
    return a, b


def _finish(
    doc: dict[str, Any],
    proj: Project,
    st: Store,
    a: Side,
    b: Side,
    action: str | None,
    asked: _Asked,
) -> None:
    """The changed rows written, the pairwise judge asked, the labels measured."""
    from agac.engine.views.compare import diff_rows

    doc["notes"] = []
    if asked.target is not None:
        doc["out"] = str(asked.target)
        doc["written"] = _write(asked.target, diff_rows(st, a, b, action))
    if asked.judge is not None:
        preferred = asked.expected.pairwise if asked.expected is not None else None
        verdicts = _pairwise(
            proj, st, a, b, action, asked.judge, asked.criteria, preferred, asked.min_agreement
        )
        for name, entry in doc["actions"].items():
            entry["pairwise"] = verdicts.get(name)
            budget = (entry["pairwise"] or {}).get("budget")
            doc["notes"] += [f"{name}: {budget}"] if budget else []
    if asked.expected is not None:
        _calibrate(doc, st, a.run, b.run, asked.expected, asked.min_agreement)


def _calibrate(
    doc: dict[str, Any],
    st: Store,
    a: RunRecord,
    b: RunRecord,
    expected: Labels,
    min_agreement: float,
) -> None:
    """Each run's checks (and the pairwise judge) against the labels, with the warnings."""
    from agac.engine.pairwise import uncalibrated_pairwise
    from agac.engine.views.pilot import answer_rows, calibration, uncalibrated_notes

    doc["calibration"] = {}
    notes: list[str] = doc["notes"]
    for side, run in (("a", a), ("b", b)):
        calibrated = calibration(list(answer_rows(st, run)), expected.checks, min_agreement)
        doc["calibration"][side] = calibrated
        notes += uncalibrated_notes(calibrated, min_agreement, "labelled units", f" in {side}")
    for name, entry in doc["actions"].items():
        notes += uncalibrated_pairwise(name, entry.get("pairwise"))


def _pairwise(
    proj: Project,
    st: Store,
    a: Side,
    b: Side,
    action: str | None,
    judge: str,
    criteria: str | None,
    preferred: dict[str, str] | None,
    min_agreement: float,
) -> dict[str, Any]:
    """The pairwise judge's verdicts per action (engine/pairwise.py); ``preferred``: the
    labelled preference per record, measured against the judge's."""
    import asyncio

    from agac.engine.pairwise import Pair, judge_pairs
    from agac.engine.views.compare import answered_pairs
    from agac.keys import record_of
    from agac.providers.factory import open_providers
    from agac.providers.pricing import PriceTable

    provider_name, sep, name = judge.partition("/")
    if not sep or not name:
        raise UsageError(f"--judge {judge!r}: name the judge's model as provider/model")
    pairs = [
        Pair(act, key, _source(st, a.run, record_of(key)), left, right)
        for act, key, left, right in answered_pairs(st, a, b, action)
    ]
    opened = open_providers({provider_name}, proj.config)

    async def ask() -> dict[str, Any]:
        try:
            return await judge_pairs(
                pairs,
                model=judge,
                criteria=criteria,
                provider=opened[provider_name],
                store=st,
                run=b.run,
                prices=PriceTable(dict(proj.config.prices)),
                clock=st.clock,
                preferred=preferred,
                min_agreement=min_agreement,
            )
        finally:
            for p in opened.values():
                await p.aclose()

    return asyncio.run(ask())


def _source(st: Store, run: RunRecord, key: str) -> Any:
    row = st.find_record(run.snapshot_id, key)
    return json.loads(row.payload) if row is not None and row.payload else None


def _out_path(out: str | Path | None) -> Path | None:
    if out is None:
        return None
    path = Path(out)
    if path.suffix.lower() not in (".csv", ".jsonl", ".json"):
        raise UsageError(f"--out {path}: write the changed rows to a .csv, .jsonl or .json file")
    return path


def _write(path: Path, rows: Any) -> int:
    """The changed rows: JSON lines, a JSON array, or CSV (``action, key``, then each run's
    status, reason and answer, and the fields that changed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    n = 0
    with path.open("w", encoding="utf-8", newline="") as fh:
        if suffix == ".csv":
            writer = csv.writer(fh)
            writer.writerow(
                [
                    "action",
                    "key",
                    "a.status",
                    "a.reason",
                    "a.output",
                    "b.status",
                    "b.reason",
                    "b.output",
                    "fields",
                ]
            )
        elif suffix == ".json":
            fh.write("[")
        for row in rows:
            n += 1
            if suffix == ".csv":
                writer.writerow(
                    [
                        row["action"],
                        row["key"],
                        *_cells(row["a"]),
                        *_cells(row["b"]),
                        " ".join(row["fields"]),
                    ]
                )
            elif suffix == ".json":
                fh.write(("," if n > 1 else "") + "\n  " + json.dumps(row, ensure_ascii=False))
            else:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        if suffix == ".json":
            fh.write("\n]\n")
    return n


def _cells(side: dict[str, Any] | None) -> list[str]:
    if side is None:
        return ["", "", ""]
    output = side["output"]
    return [
        side["status"],
        side["reason"] or "",
        "" if output is None else json.dumps(output, ensure_ascii=False),
    ]
