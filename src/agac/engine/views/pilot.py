"""``agac pilot``'s report, read from the store once the pilot's run has ended: the sampled
records' answers, each check's pass rate, what the pilot cost and took, and what the whole
input would cost and take in each tier (engine/views/projection.py).

A unit the pilot reused (its answer stored by an earlier run) cost the pilot nothing; its
record is projected with the calls that first asked it (the ledger, by fingerprint), so a
second pilot over the same sample projects what the first did.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from agac.engine.report.jsondoc import to_json
from agac.engine.views.projection import Call, project_tiers
from agac.keys import record_of
from agac.providers.base import Usage
from agac.providers.registry import provider_spec

if TYPE_CHECKING:
    from agac.data.sampling import Sample
    from agac.engine.report.run import RunSummary
    from agac.providers.pricing import PriceTable
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = [
    "answer_columns",
    "answer_rows",
    "calibration",
    "pilot_report",
    "tier_pricer",
    "uncalibrated_notes",
]


def pilot_report(
    store: Store,
    run: RunRecord,
    sample: Sample,
    prices: PriceTable,
    summary: RunSummary,
    *,
    stratify: str | None,
    seed: int,
) -> dict[str, Any]:
    """The pilot's report (``agac pilot --json``)."""
    elapsed = max((run.ended_at or run.updated_at) - run.created_at, 0.0)
    calls, reused = _sample_calls(store, run)
    return {
        "run_id": run.id,
        "workflow": run.workflow,
        "state": summary.state,
        "sample": {
            "records": len(sample.keys),
            "of": sample.population,
            "seed": seed,
            "stratify": stratify,
            "strata": (
                {s: {"records": n, "sampled": k} for s, (n, k) in sample.strata.items()}
                if stratify is not None
                else None
            ),
        },
        "actions": to_json(summary.actions),
        "checks": to_json(summary.checks),
        "measured": {
            "cost_usd": round(float(summary.cost_usd or 0.0), 6),
            "seconds": round(elapsed, 3),
            "calls": sum(len(c) for c in calls.values()) - reused,
            "reused_units": reused,
        },
        "projection": project_tiers(
            calls, sample.strata, sample.stratum_of, tier_pricer(prices), elapsed
        ),
        "answers": list(answer_rows(store, run)),
    }


def tier_pricer(prices: PriceTable) -> Callable[[str, Usage, str], float | None]:
    """(model, usage, tier) → USD at ``online``, ``batch`` or ``flex`` (at the rate the
    provider bills flex at; None for a model it does not serve on flex)."""

    def price(model: str, usage: Usage, tier: str) -> float | None:
        if tier == "flex":
            provider, _, name = model.partition("/")
            spec = provider_spec(provider)
            if spec.flex is None or not spec.flex_serves(name):
                return None
            tier = spec.flex.billed
        return prices.cost(model, usage, "batch" if tier == "batch" else "live")

    return price


def _sample_calls(store: Store, run: RunRecord) -> tuple[dict[str, list[Call]], int]:
    """Each sampled record's calls, and how many units the pilot reused (their first
    asking's calls stand in for them)."""
    calls: dict[str, list[Call]] = {}
    for row in store.run_usage(run.id):
        calls.setdefault(record_of(row.unit_key), []).append(_call(row))
    reused: list[tuple[str, str]] = []
    for action in run.action_names:
        for o in store.iter_action_outcomes(run.id, action):
            calls.setdefault(record_of(o.unit_key), [])
            if o.origin == "reused" and o.fingerprint is not None:
                reused.append((record_of(o.unit_key), o.fingerprint))
    first = store.twin_usage([fp for _, fp in reused], tenant=run.tenant)
    count = 0
    for key, fp in reused:
        if fp in first:
            calls[key].append(_call(first[fp]))
            count += 1
    return calls, count


def _call(row: Any) -> Call:
    usage = Usage(
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cached_tokens=row.cached_tokens,
        cache_write_tokens=row.cache_write_tokens,
        reasoning_tokens=row.reasoning_tokens,
    )
    return Call(f"{row.provider}/{row.model}", usage)


def answer_rows(store: Store, run: RunRecord) -> Iterator[dict[str, Any]]:
    """One row per sampled record, in input order: its key, and per action the unit's
    status, reason, detail, answer and check verdicts."""
    by_key: dict[str, dict[str, Any]] = {}
    order: list[tuple[int, str]] = []
    for action in run.action_names:
        for o in store.iter_action_outcomes(run.id, action):
            row = by_key.get(o.unit_key)
            if row is None:
                row = by_key[o.unit_key] = {"key": o.unit_key}
                order.append((o.seq, o.unit_key))
            row[action] = {
                "status": o.status,
                "reason": o.reason,
                "detail": o.detail,
                "output": json.loads(o.output) if o.output is not None else None,
                "checks": json.loads(o.checks) if o.checks else None,
            }
    for _, key in sorted(order):
        yield by_key[key]


def answer_columns(rows: Sequence[dict[str, Any]], actions: Sequence[str]) -> list[str]:
    """The flat columns of ``--out FILE`` as CSV: key, then per action its status, reason,
    answer and one column per check (``<action>.check.<name>``)."""
    columns = ["key"]
    for action in actions:
        checks: dict[str, None] = {}
        for row in rows:
            checks.update(dict.fromkeys((row.get(action) or {}).get("checks") or {}))
        columns += [f"{action}.status", f"{action}.reason", f"{action}.output"]
        columns += [f"{action}.check.{name}" for name in checks]
    return columns


def calibration(
    answers: Sequence[dict[str, Any]],
    labels: dict[str, dict[str, bool]],
    min_agreement: float,
) -> dict[str, dict[str, Any]]:
    """Per action and check with labels, how its verdicts on the sampled units agree with
    the expected ones (``labels``: record key → check name → should pass). A failed check
    is the positive: ``tpr`` is the share of the answers labelled bad that the check
    failed, ``fpr`` the share of those labelled good that it failed. ``uncalibrated`` when
    the agreement is below ``min_agreement``."""
    tallies: dict[tuple[str, str], dict[str, int]] = {}
    for row in answers:
        expected = labels.get(record_of(row["key"]))
        if not expected:
            continue
        for action, unit in row.items():
            if action == "key" or not isinstance(unit, dict):
                continue
            for check, passed in (unit.get("checks") or {}).items():
                if check not in expected:
                    continue
                cell = _cell(expected[check], passed)
                counts = tallies.setdefault((action, check), dict.fromkeys(_CELLS, 0))
                counts[cell] += 1
    out: dict[str, dict[str, Any]] = {}
    for (action, check), c in tallies.items():
        n = sum(c.values())
        agreement = (c["tp"] + c["tn"]) / n
        bad, good = c["tp"] + c["fn"], c["fp"] + c["tn"]
        out.setdefault(action, {})[check] = {
            "labelled": n,
            "agreement": round(agreement, 4),
            "tpr": round(c["tp"] / bad, 4) if bad else None,
            "fpr": round(c["fp"] / good, 4) if good else None,
            "confusion": dict(c),
            "uncalibrated": agreement < min_agreement,
        }
    return out


def uncalibrated_notes(
    calibrated: dict[str, dict[str, Any]], min_agreement: float, units: str, side: str = ""
) -> list[str]:
    """A ``judge_uncalibrated`` warning per check whose agreement with the labels is below
    ``min_agreement`` (``calibrated`` as :func:`calibration` gives it; ``units`` names what
    was labelled, ``side`` the run it is about, if any)."""
    return [
        f"warning: check {check!r} of {action}{side} agrees with the labels on "
        f"{c['agreement']:.0%} of {c['labelled']} {units}, under "
        f"{min_agreement:.0%}: read its failures before trusting it [judge_uncalibrated]"
        for action, checks in calibrated.items()
        for check, c in checks.items()
        if c["uncalibrated"]
    ]


_CELLS = ("tp", "fp", "tn", "fn")


def _cell(should_pass: bool, passed: bool) -> str:
    """The confusion cell of one verdict, a failed check being the positive."""
    if not passed:
        return "fp" if should_pass else "tp"
    return "tn" if should_pass else "fn"
