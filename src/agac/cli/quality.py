"""``agac pilot``: is it good enough, before the whole input is paid for (docs/cli.md, agac
pilot; docs/tutorials/quality.md). Loaded by ``agac`` on first use (``cli/main.py``,
``LAZY``)."""

from __future__ import annotations

import json
from typing import Any

import click

from agac.cli.main import _emit_json, command, json_option, tenant_option

__all__ = ["pilot"]

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
@tenant_option
@json_option
@command
def pilot(
    workflow: str,
    sample: int,
    stratify: str | None,
    seed: int,
    out: str | None,
    tenant: str | None,
    as_json: bool,
) -> int:
    """Run the workflow online on a reproducible sample of its input; print the answers,
    each check's pass rate, what it cost and took, and the whole input's projected cost
    and time per tier. A later run reuses every pilot answer."""
    from agac import api

    doc = api.pilot(
        workflow,
        sample=sample,
        stratify=stratify,
        seed=seed,
        out=out,
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
