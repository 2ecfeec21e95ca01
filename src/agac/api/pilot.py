"""``agac pilot``: the workflow run on a reproducible sample of its input before the whole of
it is paid for (docs/cli.md, agac pilot).

A pilot is a run like any other — in the tenant, with its ledger, sessions and checks —
over the records a seeded sample chose (agac/data/sampling.py), with every llm action
on flex where its provider sells it for its model, else online: a pilot never waits for
a batch. Its answers are stored by fingerprint, so the
full run that follows (``agac run``) reuses each one whose request is unchanged and sends
only the rest. The report (engine/views/pilot.py) says what the answers are, how often
each check passed, what the pilot cost and took, and what the whole input would cost and
take in each tier.
"""

from __future__ import annotations

import csv
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.api.inline import WorkflowRef, project_for, workflow_file
from agac.api.labels import read_labels
from agac.api.progress import ProgressMode, RunProgress
from agac.api.projects import ProjectRef, scope_of, using
from agac.api.threads import RunControl, in_thread, loop_running
from agac.api.workflows import load_workflow
from agac.errors import UsageError

if TYPE_CHECKING:
    from agac.api.projects import Principal
    from agac.config.model import Workflow
    from agac.data.sources import RecordSource
    from agac.store.repository import Store

__all__ = ["pilot"]


def pilot(
    workflow: WorkflowRef,
    project: ProjectRef = None,
    *,
    sample: int,
    stratify: str | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    labels: str | Path | None = None,
    min_agreement: float = 0.8,
    tenant: str | None = None,
    progress: ProgressMode = "auto",
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """``agac pilot``: run the workflow (online, or flex where sold) over ``sample`` records of its input chosen
    by ``seed`` (split over the values of the field ``stratify`` in proportion, when
    given), and return the report: ``sample``, ``actions`` and ``checks`` (pass rates) as
    in a run's summary, ``measured`` (cost, seconds, calls), ``projection`` (per tier
    ``batch``/``flex``/``online``: the whole input's cost with its 95 % interval, what is
    left after the pilot, and time; None for a tier a model is not sold at) and
    ``answers`` (one row per sampled record). ``out`` also writes the answers to a file
    (``.csv``, ``.jsonl`` or ``.json``).

    ``labels`` names a file of expected verdicts (``.csv`` or ``.jsonl``: a ``key`` and,
    per check, ``pass``/``fail`` or true/false); the report's ``calibration`` then says,
    per check, how its verdicts agree with them (a warning ``judge_uncalibrated`` in the
    notes below ``min_agreement``).

    Refused while the workflow has an open run that is not a pilot: finish or cancel it
    first. An interrupted pilot is admitted anew by the next one (its answers reused).

    Inside a running event loop (a notebook's cell) it runs on a thread of its own, as
    :func:`agac.run` does."""
    call = functools.partial(
        _pilot,
        workflow,
        project,
        sample=sample,
        stratify=stratify,
        seed=seed,
        out=out,
        labels=labels,
        min_agreement=min_agreement,
        tenant=tenant,
        progress=progress,
        principal=principal,
        store=store,
    )
    if loop_running():
        return in_thread(call, RunControl())
    return call()


def _pilot(
    workflow: WorkflowRef,
    project: ProjectRef = None,
    *,
    sample: int,
    stratify: str | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    labels: str | Path | None = None,
    min_agreement: float = 0.8,
    tenant: str | None = None,
    progress: ProgressMode = "auto",
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    from agac.data.sampling import SampleSource, choose_sample
    from agac.engine.lifecycle.options import RunOptions
    from agac.engine.lifecycle.runs import start_run
    from agac.engine.lifecycle.snapshots import input_source
    from agac.engine.views.pilot import calibration, pilot_report, uncalibrated_notes
    from agac.providers.pricing import PriceTable

    if sample < 1:
        raise UsageError(f"--sample must be at least 1, got {sample}")
    target = _out_format(out)
    expected = read_labels(Path(labels)).checks if labels is not None else None
    proj = project_for(project)
    acting = scope_of(proj, tenant, principal).acting()
    ref = workflow_file(workflow, proj)
    settings = {"sample": sample, "seed": seed, "stratify": stratify}
    loaded = load_workflow(ref, proj, pilot=settings)
    view = RunProgress(progress)
    with using(proj, store) as (_, st):
        new = _pilot_open(st, loaded.name, acting)
        source = input_source(loaded, proj)
        chosen = choose_sample(_strata(source, loaded, stratify), sample, seed)
        if not chosen.keys:
            raise UsageError(f"{loaded.name}: its input holds no valid record to sample")
        options = RunOptions(
            new=new,
            source=SampleSource(source, chosen.keys),
            tenant=acting,
            overrides={"pilot": settings},
            on_start=view.start,
        )
        try:
            result = start_run(proj, st, loaded, options)
        finally:
            view.stop()
        run = st.get_run(result.run_id)
        assert run is not None
        report = pilot_report(
            st,
            run,
            chosen,
            PriceTable(dict(proj.config.prices)),
            result.summary,
            stratify=stratify,
            seed=seed,
        )
    report["notes"] = list(result.notes)
    if expected is not None:
        report["calibration"] = calibration(report["answers"], expected, min_agreement)
        report["notes"] += uncalibrated_notes(report["calibration"], min_agreement, "sampled units")
    if target is not None:
        _write_answers(target, report["answers"], list(loaded.action_names))
        report["out"] = str(target)
    return report


def _pilot_open(store: Store, workflow: str, tenant: str) -> bool:
    """Whether an open run is there to be replaced: an interrupted pilot is (True); a
    run that is not a pilot refuses the pilot."""
    open_run = store.open_run(workflow, tenant=tenant)
    if open_run is None:
        return False
    if open_run.settings.overrides.get("pilot") is None:
        raise UsageError(
            f"{workflow} has an open run ({open_run.id}); a pilot runs before a full "
            f"run, not beside it: finish it (agac run {workflow}) or cancel it "
            f"(agac cancel {workflow}) first"
        )
    return True


def _strata(
    source: RecordSource, workflow: Workflow, field: str | None
) -> Iterator[tuple[str, str]]:
    """(key, stratum) of every valid record of the input, streamed; UsageError when no
    record has the stratifying field."""
    from agac.data.sampling import NO_VALUE, stratum_of

    seen = False
    for rec in source.records(workflow.input.id_field):
        if rec.reason is not None or rec.payload is None:
            continue
        stratum = stratum_of(rec.payload, field)
        seen = seen or field is None or stratum != NO_VALUE
        yield rec.key, stratum
    if not seen:
        raise UsageError(
            f"--stratify {field}: no record of {workflow.name}'s input has that field; "
            "name a field of the records (a dotted path for a nested one)"
        )


def _out_format(out: str | Path | None) -> Path | None:
    if out is None:
        return None
    path = Path(out)
    if path.suffix.lower() not in (".csv", ".jsonl", ".json"):
        raise UsageError(f"--out {path}: write the answers to a .csv, .jsonl or .json file")
    return path


def _write_answers(path: Path, rows: list[dict[str, Any]], actions: list[str]) -> None:
    """The answers as JSON lines, a JSON array, or CSV with a column per check."""
    from agac.engine.views.pilot import answer_columns

    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".json":
        path.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    if suffix == ".jsonl":
        with path.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        return
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        columns = answer_columns(rows, actions)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row, c) for c in columns])


def _cell(row: dict[str, Any], column: str) -> str:
    if column == "key":
        return str(row["key"])
    action, _, rest = column.partition(".")
    unit = row.get(action) or {}
    if rest.startswith("check."):
        verdict = (unit.get("checks") or {}).get(rest[len("check.") :])
        return "" if verdict is None else ("pass" if verdict else "fail")
    value = unit.get(rest)
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
