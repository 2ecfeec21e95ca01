"""The run report as people read it: ``agac run``/``agac status`` (:func:`print_summary`)
and ``agac cost`` (:func:`print_cost`). Each takes the typed report (agac.engine.report)
and reads its attributes, so a renamed field fails in mypy, not in a user's terminal; the
``--json`` form of the same values is made at the command's edge (``cli/main.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

import click

from agac.cli.tables import new_table, print_table, when
from agac.engine.report.run import RunSummary
from agac.engine.report.status import StatusReport

if TYPE_CHECKING:
    from agac.engine.report.budget import BudgetReport
    from agac.engine.report.cost import CostReport, CostRow
    from agac.engine.report.counts import ActionSummary
    from agac.engine.report.status import RunProcess, ShardRow

__all__ = ["no_process_line", "print_cost", "print_summary"]


def no_process_line(summary: RunSummary, process: RunProcess) -> str:
    """A run marked running that no process runs: who held it last, and how to resume."""
    wf = summary.workflow
    tenant = summary.tenant
    if tenant and tenant != "default":
        wf += f" --tenant {tenant}"
    held = (
        f"pid {process.pid} on {process.host} stopped without ending it "
        f"(its lease ran out or the process is gone; last held until "
        f"{when(process.lease_expires_at, '%H:%M:%S')})"
        if process.pid is not None
        else "no process ever took its lease"
    )
    return f"no live process is running it: {held}; `agac run {wf}` resumes it"


def print_summary(report: RunSummary | StatusReport, interrupted: bool = False) -> None:
    """A run's summary (``agac run``, ``agac status``): the counts per action, then what
    applies of error, advice, deadline, checks, modes, hybrid switches, shards, batches
    out, approvals, unknown effects and budget, and the line that says what to run next."""
    summary = report if isinstance(report, RunSummary) else report.summary
    tenant = summary.tenant
    click.echo(
        f"run {summary.run_id} of {summary.workflow}: {summary.state}"
        + (f" (tenant {tenant})" if tenant and tenant != "default" else "")
        + (f" (retry of {summary.retry_of})" if summary.retry_of else "")
    )
    process = report.process if isinstance(report, StatusReport) else None
    if process is not None and not process.live:
        click.echo(f"  {no_process_line(summary, process)}")
    _print_counts(summary.actions)
    if isinstance(report, StatusReport) and report.store is not None:
        click.echo(f"  store: {report.store.url} ({report.store.source})")
    if summary.error is not None:
        click.echo(f"  error: {summary.error.message}")
    for a in summary.advice:
        click.echo(
            f"  {a.action}: {a.units:,} {a.status} {a.reason}; the first, "
            f"{a.first.key}: {a.first.detail}"
        )
        click.echo(f"    fix: {a.fix}")
    if summary.deadline_at:
        click.echo(f"  deadline {when(summary.deadline_at)}")
    for action, checks in summary.checks.items():
        rates = ", ".join(
            f"{name} {c.rate:.0%} ({c.passed:,}/{c.passed + c.failed:,})"
            for name, c in checks.items()
        )
        click.echo(f"  {action} checks passed: {rates}")
    for name, choice in summary.auto_modes.items():
        click.echo(f"  {name}: run_mode auto chose {choice.mode} ({choice.why})")
    for action, at in summary.cheaper_starts.items():
        click.echo(f"  {action}: run_mode auto waits for the cheaper hours, starting {when(at)}")
    for action, at in summary.cheaper_started.items():
        click.echo(f"  {action}: run_mode auto sends in the cheaper hours, since {when(at)}")
    for action, h in summary.hybrid.items():  # B13
        click.echo(
            f"  {action} {'went' if h.switched else 'goes'} live at {when(h.live_at)} (hybrid)"
        )
    if isinstance(report, StatusReport):
        _print_shards(report.shards)
    _print_waiting_on(summary)
    _print_approvals(summary)
    for key in summary.effects_unknown:
        click.echo(
            f"  effect {key[:12]} is unknown (it may or may not have happened): "
            f"agac effects resolve {key[:12]} --done|--not-done"
        )
    if summary.budget is not None:
        _print_budget(summary.budget)
    click.echo(_last_line_of(summary, interrupted))


def _print_counts(actions: Mapping[str, ActionSummary]) -> None:
    table = new_table(
        "action",
        "answered>",
        "failed>",
        "skipped>",
        "pending>",
        "calls>",
        "tool calls>",
        "reused>",
        "cost>",
        "reasons",
    )
    for name, a in actions.items():
        table.add_row(
            name,
            f"{a.answered:,}",
            f"{a.failed:,}",
            f"{a.skipped:,}",
            f"{a.pending:,}",
            f"{a.calls:,}",
            f"{a.tool_calls:,}",
            f"{a.reused:,}",
            f"${a.cost_usd:.4f}",
            ", ".join(f"{k} {v}" for k, v in sorted(a.reasons.items())),
        )
    print_table(table)


def _last_line_of(summary: RunSummary, interrupted: bool) -> str:
    """Answers reused, calls, cost, failures, and the next command."""
    actions = summary.actions.values()
    reused = sum(a.reused for a in actions)
    calls = sum(a.calls for a in actions)
    failed = sum(a.failed for a in actions)
    words = f"reused {reused:,} answers, {calls:,} calls, cost ${summary.cost_usd:.4f}"
    if failed:
        words += f"; {failed:,} failed"
    if interrupted:
        words += "; interrupted: what was in flight is saved"
    return words + (f": {summary.next}" if summary.next else "")


def _print_approvals(summary: RunSummary) -> None:
    waiting = summary.awaiting_approval
    if waiting is None:
        return
    per = ", ".join(f"{a} {n}" for a, n in sorted(waiting.actions.items()))
    click.echo(f"  awaiting approval: {waiting.units} units ({per})")
    table = new_table("proposal", "action", "record")
    for p in waiting.proposals[:10]:
        table.add_row(p.id, p.action, p.record)
    print_table(table)
    if waiting.units > 10:
        click.echo(f"  ... `agac approvals list {summary.workflow}` shows all")


def _print_budget(b: BudgetReport) -> None:
    cap = ", ".join(
        x
        for x in (
            f"${b.usd:g}" if b.usd is not None else "",
            f"{b.tokens:,} tokens" if b.tokens is not None else "",
        )
        if x
    )
    click.echo(f"  budget {cap}: spent ${b.spent_usd:.4f}, {b.spent_tokens:,} tokens")


def print_cost(doc: CostReport) -> None:
    """``agac cost``: the run's total and savings, then a line per ledger group."""
    click.echo(
        f"run {doc.run_id} of {doc.workflow}: ${doc.cost_usd:.6f}"
        f" (batch saved ${doc.batch_saved_usd:.6f}, flex saved "
        f"${doc.flex_saved_usd:.6f}, cache saved "
        f"${doc.cache_saved_usd:.6f})"
    )
    rows = doc.rows
    # Columns that only appear when some row has a count in them: the table stays narrow.
    inputs = [c for c in _INPUT_COLUMNS if any(c.count(r) for r in rows)]
    outputs = [c for c in _OUTPUT_COLUMNS if any(c.count(r) for r in rows)]
    tools = sorted({name for r in rows for name in r.server_tools})
    table = new_table(
        "action",
        "model",
        "tier",
        "calls>",
        "input tokens>",
        *(f"{c.label}>" for c in inputs),
        "output tokens>",
        *(f"{c.label}>" for c in outputs),
        *(f"{name}>" for name in tools),
        "cost>",
        "note",
    )
    for r in rows:
        table.add_row(
            r.action,
            f"{r.provider}/{r.model}",
            r.tier,
            f"{r.calls:,}",
            f"{r.input_tokens:,}",
            *(f"{c.count(r):,}" for c in inputs),
            f"{r.output_tokens:,}",
            *(f"{c.count(r):,}" for c in outputs),
            *(f"{r.server_tools.get(name, 0):,}" for name in tools),
            f"${r.cost_usd:.6f}",
            _cost_note(r),
        )
    print_table(table)


class _TokenColumn(NamedTuple):
    label: str
    count: Callable[[CostRow], int]


#: Columns of the cost table shown only when some row counts something in them: cache
#: reads and writes after the input tokens, reasoning (a part of the output) after the
#: output tokens, then one column per server tool used.
_INPUT_COLUMNS = (
    _TokenColumn("cache read", lambda r: r.cached_tokens),
    _TokenColumn("cache write", lambda r: r.cache_write_tokens),
)
_OUTPUT_COLUMNS = (_TokenColumn("reasoning", lambda r: r.reasoning_tokens),)


def _print_shards(shards: tuple[ShardRow, ...]) -> None:
    held = [s for s in shards if s.owner]
    if held:
        click.echo(f"  shards held by workers ({len(held)} of {len(shards)}):")
        table = new_table("kind", "shard", "owner")
        for s in held:
            table.add_row(s.kind, str(s.shard), s.owner)
        print_table(table)


def _print_waiting_on(summary: RunSummary) -> None:
    """Each batch still out and each file a batch action cannot send yet (B4), by name."""
    if not summary.waiting_on:
        return
    from agac import api

    final = api.is_final(summary.state)
    click.echo("  batches still out (the next run adopts them):" if final else "  waiting on:")
    table = new_table("action", "file", "batch", "status")
    for r in summary.waiting_on:
        if r.waits_on:
            table.add_row(r.action, r.file, "—", f"not sent: waits on {', '.join(r.waits_on)} (B4)")
        else:
            table.add_row(r.action, r.file, r.batch_id or r.key, r.status or r.state)
    print_table(table)


def _cost_note(r: CostRow) -> str:
    """What a cost row's figures mean when they are not plain (docs/cli.md, agac cost, S1)."""
    notes = []
    if r.price == "unpriced":
        notes.append("unpriced: no known price, counted $0 (add it to prices: in agac.yml)")
    elif r.price == "derived":
        notes.append("derived: no batch price known, half the live price")
    if r.unpriced_tools:
        names = ", ".join(r.unpriced_tools)
        notes.append(f"unpriced: {names} uses have no known price, counted $0")
    if r.origin == "unknown":
        priced = r.priced_by_a_later_answer or 0
        notes.append(
            f"outcome unknown (sent when the process stopped): {r.calls - priced} "
            f"at their worst case, {priced} priced by a later answer"
        )
    if r.origin == "cache_storage":
        notes.append(
            f"cache storage: {r.calls} explicit context cache(s) kept for the run, "
            "per token-hour (docs/providers.md, Gemini explicit caches)"
        )
    if r.origin == "unread":
        estimated = r.estimated or 0
        how = (
            f"{estimated} estimated at their worst case (the provider reported no usage)"
            if estimated
            else "usage as the provider reported it"
        )
        notes.append(
            f"unread: billed by the provider in a batch agac did not read (ended "
            f"failed/expired/cancelled, or given up); {how}"
        )
    if r.origin == "hybrid_overlap":
        notes.append(
            "hybrid_overlap: answered in a batch cancelled to go live (B13) after the "
            "record was answered live; billed, not used"
        )
    return "; ".join(notes)
