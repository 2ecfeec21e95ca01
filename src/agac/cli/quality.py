"""``agac pilot``: is it good enough, before the whole input is paid for; ``agac compare``:
two runs side by side (docs/cli.md, agac pilot, agac compare; docs/tutorials/quality.md).
Loaded by ``agac`` on first use (``cli/main.py``, ``LAZY``)."""

from __future__ import annotations

import json
from typing import Any

import click

from agac.cli.main import _emit_json, command, json_option, tenant_option
from agac.errors import UsageError

__all__ = ["compare", "pilot"]

_CELL = 60
"""The widest answer cell of the terminal table; ``--out`` keeps answers whole."""


@click.command()
@click.argument("workflow")
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    required=True,
    metavar="N",
    help="How many records of the input to run the pilot on.",
)
@click.option(
    "--stratify",
    metavar="FIELD",
    default=None,
    help="Split the sample over this field's values in proportion to the input (a dotted "
    "path for a nested field).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Which sample: the same seed and input give the same records.",
)
@click.option(
    "--out",
    default=None,
    metavar="FILE",
    help="Also write the answers to FILE (.csv, .jsonl, .json).",
)
@click.option(
    "--labels",
    metavar="FILE",
    default=None,
    help="Expected verdicts (.csv or .jsonl: key, then pass/fail per check): how each "
    "check agrees with them.",
)
@click.option(
    "--min-agreement",
    type=click.FloatRange(0, 1),
    metavar="R",
    default=0.8,
    show_default=True,
    help="Below this agreement with --labels a check is flagged judge_uncalibrated.",
)
@tenant_option
@json_option
@command
def pilot(
    workflow: str,
    sample: int,
    stratify: str | None,
    seed: int,
    out: str | None,
    labels: str | None,
    min_agreement: float,
    tenant: str | None,
    as_json: bool,
) -> int:
    """Run the workflow (online, or flex where sold) on a reproducible sample of its input; print the answers,
    each check's pass rate, what it cost and took, and the whole input's projected cost
    and time per tier. A later run reuses every pilot answer."""
    from agac import api

    doc = api.pilot(
        workflow,
        sample=sample,
        stratify=stratify,
        seed=seed,
        out=out,
        labels=labels,
        min_agreement=min_agreement,
        tenant=tenant,
        progress=False if as_json else "auto",
    )
    for note in doc["notes"]:
        click.echo(note, err=True)
    if as_json:
        _emit_json(doc)
    else:
        print_pilot(doc)
    return 0 if doc["state"] == "succeeded" else 1


def print_pilot(doc: dict[str, Any]) -> None:
    """The answers table, the check pass rates, what was measured and the projection."""
    from agac.cli.render import new_table, print_table

    s = doc["sample"]
    how = f", stratified by {s['stratify']}" if s["stratify"] else ""
    click.echo(
        f"pilot {doc['run_id']} of {doc['workflow']}: {s['records']} of {s['of']} records "
        f"(seed {s['seed']}{how}), {doc['state']}"
    )
    actions = list(doc["actions"])
    table = new_table("key", *actions)
    for row in doc["answers"]:
        table.add_row(row["key"], *(_answer(row.get(a)) for a in actions))
    print_table(table)
    for action, checks in doc["checks"].items():
        rates = ", ".join(
            f"{name} {c['rate']:.0%} ({c['passed']}/{c['passed'] + c['failed']})"
            for name, c in checks.items()
        )
        click.echo(f"{action} checks passed: {rates}")
    _print_calibration(doc.get("calibration") or {}, "")
    m = doc["measured"]
    reused = f", {m['reused_units']} answers reused" if m["reused_units"] else ""
    click.echo(
        f"measured: {_usd(m['cost_usd'])} in {m['seconds']:.1f}s, {m['calls']} calls{reused}"
    )
    click.echo(f"projected for all {s['of']} records (95% interval):")
    proj = new_table("tier", "cost>", "low>", "high>", "after pilot>", "time")
    for tier in ("batch", "flex", "online"):
        p = doc["projection"][tier]
        if p is None:
            proj.add_row(tier, "not sold for these models", "", "", "", "")
            continue
        proj.add_row(
            tier,
            _usd(p["estimate_usd"]),
            _usd(p["low_usd"]),
            _usd(p["high_usd"]),
            _usd(p["after_pilot_usd"]),
            _time(p["time_s"]),
        )
    print_table(proj)
    if doc.get("out"):
        click.echo(f"wrote the answers to {doc['out']}", err=True)


def _print_calibration(calibrated: dict[str, Any], prefix: str) -> None:
    """Each check's agreement with the labels, its rates and confusion matrix."""
    for action, checks in calibrated.items():
        for check, c in checks.items():
            rates = ", ".join(
                f"{name} {c[name]:.0%}" for name in ("tpr", "fpr") if c[name] is not None
            )
            click.echo(
                f"{prefix}{action} check {check} against the labels: agrees "
                f"{c['agreement']:.0%} ({c['labelled']} labelled{', ' + rates if rates else ''}; "
                + " ".join(f"{k} {v}" for k, v in c["confusion"].items())
                + ")"
            )


def _answer(unit: dict[str, Any] | None) -> str:
    if unit is None:
        return "-"
    if unit["status"] != "answered":
        return f"{unit['status']} {unit['reason'] or ''}".strip()
    text = json.dumps(unit["output"], ensure_ascii=False, separators=(",", ":"))
    failed = [n for n, ok in (unit["checks"] or {}).items() if not ok]
    if failed:
        text = f"[{', '.join(failed)} failed] {text}"
    return text if len(text) <= _CELL else text[: _CELL - 1] + "…"


def _usd(x: float) -> str:
    """Dollars with four decimals, six under a cent (a pilot's sample is often that)."""
    return f"${x:.6f}" if 0 < x < 0.01 else f"${x:.4f}"


def _time(t: dict[str, Any]) -> str:
    if t["estimate"] is None:
        return f"within {t['high'] / 3600:.0f}h (the batch window)"
    span = f"{_seconds(t['estimate'])} ({_seconds(t['low'])}-{_seconds(t['high'])})"
    return f"at least {span}" if t.get("at_least") else span


def _seconds(s: float) -> str:
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


@click.command()
@click.argument("run_a")
@click.argument("run_b", required=False)
@click.option(
    "--action",
    metavar="A",
    default=None,
    help="Compare this action only (default: every action both runs have); with "
    "--variants, the action whose variants are compared.",
)
@click.option(
    "--variants",
    metavar="A,B",
    is_flag=False,
    flag_value="",
    default=None,
    help="Compare two variants of an action of RUN_A (no RUN_B): its primary and the next, "
    "or the two named (--variants small,large).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    metavar="N",
    help="Changed rows to list per action (--out writes them all).",
)
@click.option(
    "--out",
    default=None,
    metavar="FILE",
    help="Write every changed row to FILE (.csv, .jsonl, .json).",
)
@click.option(
    "--judge",
    metavar="MODEL",
    default=None,
    help="A pairwise judge (provider/model): each pair of differing answers shown in both "
    "orders; B's win rate with its 95% interval. Its calls go in run B's ledger.",
)
@click.option(
    "--criteria",
    metavar="TEXT",
    default=None,
    help="What makes an answer better, told to the pairwise judge.",
)
@click.option(
    "--labels",
    metavar="FILE",
    default=None,
    help="Expected verdicts (.csv or .jsonl: key, pass/fail per check, a pairwise column "
    "of a, b or tie): how each run's checks and the pairwise judge agree with them.",
)
@click.option(
    "--min-agreement",
    type=click.FloatRange(0, 1),
    metavar="R",
    default=0.8,
    show_default=True,
    help="Below this agreement with --labels a judge is flagged judge_uncalibrated.",
)
@tenant_option
@json_option
@command
def compare(
    run_a: str,
    run_b: str | None,
    action: str | None,
    variants: str | None,
    limit: int,
    out: str | None,
    judge: str | None,
    criteria: str | None,
    labels: str | None,
    min_agreement: float,
    tenant: str | None,
    as_json: bool,
) -> int:
    """Compare two runs over the same records, or two variants of an action in one run
    (--variants): agreement per field, the rows that changed, enum distributions, numeric
    deltas, check pass rates and cost per run or variant."""
    from agac import api
    from agac.api.compare import variant_pair

    asked: dict[str, Any] = {
        "action": action,
        "limit": limit,
        "out": out,
        "judge": judge,
        "criteria": criteria,
        "labels": labels,
        "min_agreement": min_agreement,
        "tenant": tenant,
    }
    if variants is not None:
        if run_b is not None:
            raise UsageError("--variants compares the variants of one run: name RUN_A only")
        doc = api.compare_variants(run_a, variants=variant_pair(variants), **asked)
    elif run_b is None:
        raise UsageError("name two runs (agac compare RUN_A RUN_B), or one with --variants")
    else:
        doc = api.compare(run_a, run_b, **asked)
    for note in doc.get("notes", ()):
        click.echo(note, err=True)
    if as_json:
        _emit_json(doc)
    else:
        print_compare(doc)
    return 0


def print_compare(doc: dict[str, Any]) -> None:
    """Each run's cost and checks, then per action its agreement, distributions, deltas
    and changed rows."""
    from agac.cli.render import new_table, print_table

    runs = new_table("run", "workflow", "models", "calls>", "tokens in>", "tokens out>", "cost>")
    for side in ("a", "b"):
        r = doc["runs"][side]
        runs.add_row(
            f"{side.upper()} {r['run_id']}",
            r["workflow"],
            ", ".join(r["models"]),
            str(r["calls"]),
            f"{r['input_tokens']:,}",
            f"{r['output_tokens']:,}",
            _usd(r["cost_usd"]),
        )
    print_table(runs)
    chosen = doc.get("variants")
    if chosen:
        for side in ("a", "b"):
            stored = doc["runs"][side]["action"]
            own = f" ({stored})" if stored != chosen["action"] else ""
            click.echo(f"{side.upper()}: variant {chosen[side]} of {chosen['action']}{own}")
    for name, c in doc["actions"].items():
        u = c["units"]
        click.echo(
            f"{name}: {u['both']} units in both ({u['only_a']} only in A, {u['only_b']} only "
            f"in B), {c['status_changed']} changed status, {c['changed_count']} rows differ"
        )
        _print_checks(doc, name)
        for side in ("a", "b"):
            calibrated = (doc.get("calibration") or {}).get(side, {})
            _print_calibration({name: calibrated.get(name, {})}, f"  {side.upper()} ")
        if c["agreement"]:
            agreement = ", ".join(
                f"{f} {a['rate']:.0%} ({a['same']}/{a['compared']})"
                for f, a in c["agreement"].items()
                if a["rate"] is not None
            )
            click.echo(f"  agreement: {agreement}")
        for field, sides in c["distributions"].items():
            values = sorted({*sides["a"], *sides["b"]})
            shown = ", ".join(f"{v} {sides['a'].get(v, 0)}→{sides['b'].get(v, 0)}" for v in values)
            click.echo(f"  {field} (A→B): {shown}")
        for field, d in c["numeric"].items():
            click.echo(
                f"  {field}: mean {d['mean_a']:g} → {d['mean_b']:g} (Δ {d['mean_delta']:+g}, "
                f"mean |Δ| {d['mean_abs_delta']:g}, max |Δ| {d['max_abs_delta']:g}, "
                f"{d['changed']}/{d['compared']} changed)"
            )
        pairwise = c.get("pairwise")
        if pairwise:
            click.echo(
                f"  judged by {pairwise['model']} (both orders): B wins {pairwise['b_wins']}, "
                f"A wins {pairwise['a_wins']}, ties {pairwise['ties']}; B's win rate "
                f"{pairwise['b_win_rate']:.0%} (95% {pairwise['ci95'][0]:.0%}-"
                f"{pairwise['ci95'][1]:.0%}), {pairwise['calls']} calls, "
                f"{_usd(pairwise['cost_usd'])}"
            )
            labelled = pairwise.get("labels")
            if labelled and labelled["labelled"]:
                click.echo(
                    f"  the pairwise judge against the labels: agrees "
                    f"{labelled['agreement']:.0%} ({labelled['labelled']} labelled pairs)"
                )
        if c["changed"]:
            table = new_table("key", "A", "B", "fields")
            for row in c["changed"]:
                table.add_row(row["key"], _side(row["a"]), _side(row["b"]), " ".join(row["fields"]))
            print_table(table)
            more = c["changed_count"] - len(c["changed"])
            if more > 0:
                click.echo(f"  … and {more} more (--limit, or --out FILE for them all)")
    if doc.get("out"):
        click.echo(f"wrote {doc['written']} changed rows to {doc['out']}", err=True)


def _print_checks(doc: dict[str, Any], action: str) -> None:
    for side in ("a", "b"):
        checks = doc["runs"][side]["checks"].get(action)
        if checks:
            rates = ", ".join(
                f"{n} {c['rate']:.0%} ({c['passed']}/{c['passed'] + c['failed']})"
                for n, c in checks.items()
            )
            click.echo(f"  checks passed in {side.upper()}: {rates}")


def _side(side: dict[str, Any] | None) -> str:
    if side is None:
        return "-"
    if side["status"] != "answered":
        return f"{side['status']} {side['reason'] or ''}".strip()
    text = json.dumps(side["output"], ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _CELL else text[: _CELL - 1] + "…"
