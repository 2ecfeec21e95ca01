"""Terminal rendering for the CLI: progress bars, summaries, sessions, tables.

Rich draws progress on stderr only when it is a terminal; otherwise progress is a plain
line every few seconds. Lists are Rich tables with a header row, their columns sized to
the longest value: in a terminal with its styles and width, into a pipe as plain text
that is never wrapped (no escape codes, no trailing spaces). Nothing here talks to the
store or providers directly.
"""

from __future__ import annotations

import io
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from agac.engine.report.run import RunSummary
from agac.engine.report.status import StatusReport

if TYPE_CHECKING:
    from rich.table import Table

    from agac.engine.report.budget import BudgetReport
    from agac.engine.report.cost import CostReport, CostRow
    from agac.engine.report.counts import ActionSummary
    from agac.engine.report.status import RunProcess, ShardRow

__all__ = [
    "ProgressView",
    "attachment_line",
    "cache_line",
    "follow_events",
    "new_table",
    "no_process_line",
    "print_cost",
    "print_effects",
    "print_event",
    "print_events",
    "print_plan",
    "print_proposals",
    "print_records",
    "print_retry_plan",
    "print_runs",
    "print_session",
    "print_summary",
    "print_table",
    "shown",
    "when",
]


_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(text: str) -> str:
    """``text`` safe to print in one cell or line: control characters (newline, NUL, ESC,
    …), line and paragraph separators and bidirectional controls written as escapes
    (``\\n``, ``\\x00``, ``\\u202e``), so a record key cannot break a table's lines, move
    the cursor or reorder what follows it."""
    if text.isprintable() and not any(c in _BIDI for c in text):
        return text
    out = []
    for c in text:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif not c.isprintable() and c != " " or c in _BIDI:
            code = ord(c)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(c)
    return "".join(out)


def new_table(*columns: str) -> Table:
    """A table with these column headers; a header ending in ``>`` is a right-aligned
    (numeric) column, shown without the ``>``. Every text cell is :func:`shown`."""
    from rich import box
    from rich.table import Table

    class _Table(Table):
        def add_row(self, *cells: Any, **options: Any) -> None:
            super().add_row(*(shown(c) if isinstance(c, str) else c for c in cells), **options)

    table = _Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for column in columns:
        right = column.endswith(">")
        table.add_column(column.rstrip(">"), justify="right" if right else "left", overflow="fold")
    return table


def print_table(table: Table) -> None:
    """Print ``table`` on stdout: styled in a terminal, plain and unwrapped in a pipe."""
    from rich.console import Console

    if sys.stdout.isatty():
        Console(markup=False, highlight=False, emoji=False).print(table)
        return
    buffer = io.StringIO()
    Console(
        file=buffer,
        width=100_000,
        markup=False,
        highlight=False,
        emoji=False,
        color_system=None,
        force_terminal=False,
    ).print(table)
    for line in buffer.getvalue().splitlines():
        click.echo(line.rstrip())


def when(ts: float | None, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """A Unix time as local time; ``-`` for none."""
    return "-" if ts is None else time.strftime(fmt, time.localtime(ts))


class ProgressView:
    """Per-action bars (done/total, failures, cost so far), refreshed from a thread."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, progress: Any, executor: Any) -> None:
        if not self.enabled:
            return
        target = self._rich if sys.stderr.isatty() else self._plain
        self._thread = threading.Thread(target=target, args=(progress,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def _rich(self, progress: Any) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(stderr=True)
        with Progress(
            TextColumn("{task.description:<16}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[extra]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        ) as bars:
            tasks = {
                a: bars.add_task(a, total=_total(progress, a), extra="") for a in progress.actions
            }
            while not self._stop.is_set():
                self._update(bars, tasks, progress)
                self._stop.wait(0.2)
            self._update(bars, tasks, progress)

    @staticmethod
    def _update(bars: Any, tasks: dict[str, Any], progress: Any) -> None:
        for a, tid in tasks.items():
            row = progress.actions[a]
            extra = f"failed {row['failed']}  skipped {row['skipped']}  ${row['cost']:.4f}"
            if progress.batches.get(a):
                extra += f"  {progress.batches[a]}"
            bars.update(tid, total=_total(progress, a), completed=progress.done(a), extra=extra)

    def _plain(self, progress: Any) -> None:
        from agac.api.progress import Pace, progress_line

        last = ""
        pace = Pace(progress, time.monotonic())
        while not self._stop.wait(5.0):
            line = progress_line(progress)
            if line != last:
                shown = progress_line(progress, pace.text(progress, time.monotonic()))
                click.echo(f"progress: {shown}", err=True)
                last = line


def _total(progress: Any, action: str) -> int:
    """An action's units so far: fan-outs add their items as parents fan out."""
    return int(getattr(progress, "totals", {}).get(action, progress.total))


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


def print_runs(rows: list[dict[str, Any]]) -> None:
    table = new_table("run", "tenant", "workflow", "state", "started", "ended", "retry of")
    for r in rows:
        table.add_row(
            r["run_id"],
            r.get("tenant", "default"),
            r["workflow"],
            r["state"],
            when(r["created_at"]),
            when(r.get("ended_at")),
            r["retry_of"] or "",
        )
    print_table(table)


def print_events(rows: list[dict[str, Any]]) -> None:
    table = new_table("id>", "time", "kind", "action", "unit", "data")
    for e in rows:
        table.add_row(
            str(e["id"]),
            when(e["created_at"], "%H:%M:%S"),
            e["kind"],
            e.get("action") or "",
            e.get("unit_key") or "",
            _event_data(e),
        )
    print_table(table)


def print_event(e: dict[str, Any]) -> None:
    """One event as a line, for streams (``agac status --follow``)."""
    where = " ".join(x for x in (e.get("action"), e.get("unit_key")) if x)
    click.echo(
        f"{e['id']:>6} {when(e['created_at'], '%H:%M:%S')} {e['kind']:<16} {where} {_event_data(e)}"
    )


def _event_data(e: dict[str, Any]) -> str:
    data = {k: v for k, v in (e.get("data") or {}).items() if k != "traceback"}
    if e["kind"] == "progress" and isinstance(data.get("actions"), dict):
        parts = [
            f"{name} {a['answered'] + a['failed'] + a['skipped']}/{a['records']}"
            + (f" ({a['failed']} failed)" if a["failed"] else "")
            for name, a in data["actions"].items()
        ]
        return f"{'; '.join(parts)}  ${float(data.get('cost_usd') or 0):.4f}"
    return json.dumps(data, default=str)


def print_retry_plan(plan: dict[str, Any]) -> None:
    """``agac retry --dry-run``: what would be asked again."""
    click.echo(
        f"would retry {len(plan['units'])} failed units of run {plan['retry_of']} "
        f"(+{plan['downstream']} downstream)"
    )
    table = new_table("action", "key")
    for u in plan["units"]:
        table.add_row(u["action"], u["key"])
    if plan["units"]:
        print_table(table)


def print_records(doc: dict[str, Any]) -> None:
    """``agac records list``: one row per unit."""
    table = new_table("key", "action", "status", "reason")
    for u in doc["units"]:
        table.add_row(u["key"], u["action"], u["status"], u["reason"] or "")
    if doc["units"]:
        print_table(table)


def print_effects(rows: list[dict[str, Any]]) -> None:
    table = new_table("id", "workflow", "action", "record", "state", "idempotent", "error")
    for r in rows:
        table.add_row(
            r["id"][:12],
            r["workflow"],
            r["action"],
            r["record"],
            r["state"],
            "yes" if r["idempotent"] else "no",
            r.get("error") or "",
        )
    print_table(table)


def print_proposals(rows: list[dict[str, Any]]) -> None:
    table = new_table(
        "id", "workflow", "action", "record", "state", "expires", "approvers", "arguments"
    )
    for p in rows:
        args = json.dumps(p["arguments"], ensure_ascii=False, default=str)
        table.add_row(
            p["id"],
            p["workflow"],
            p["action"],
            p["record"],
            p["state"],
            when(p["expires_at"], "%Y-%m-%d %H:%M"),
            ", ".join(p["approvers"]),
            args if len(args) <= 80 else args[:79] + "…",
        )
    print_table(table)


def follow_events(ref: str | None, as_json: bool, tenant: str | None = None) -> None:
    """Replay a run's events, then stream new ones until the run is final (R3)."""
    from agac import api

    last = 0
    while True:
        for e in api.events(ref, after=last, tenant=tenant):
            last = e["id"]
            if as_json:
                click.echo(json.dumps(e, default=str), err=True)
            else:
                print_event(e)
        if api.is_final(api.status(ref, tenant=tenant).summary.state):
            return
        time.sleep(0.5)


def print_session(doc: dict[str, Any]) -> None:
    click.echo(
        f"record {shown(doc['key'])} of {doc['workflow']} (run {doc['run_id']}): {doc['status']}"
        f"  ${doc['cost_usd']:.6f}"
    )
    rec = doc.get("record")
    if rec:
        click.echo(f"  from {rec['file']} line {rec['line']}")
        if rec.get("error"):
            click.echo(f"  invalid: {rec['error']}")
    if doc.get("failed_items"):
        click.echo(f"  failed items: {', '.join(shown(k) for k in doc['failed_items'])}")
    _print_units(doc, "  ")
    for e in doc["errors"]:
        tb = e["data"].get("traceback")
        where = (
            f" ({shown(e['unit_key'])})"
            if e.get("unit_key") and e["unit_key"] != doc["key"]
            else ""
        )
        click.echo(
            f"  error in {e['action']}{where}: {e['data'].get('reason')}: {e['data'].get('detail')}"
        )
        if tb:
            click.echo("    " + tb.rstrip().replace("\n", "\n    "))


def _print_units(doc: dict[str, Any], pad: str) -> None:
    """A unit's actions, with its fan-out items (indented) before the first join."""
    items = list(doc.get("items", []))
    for a in doc["actions"]:
        if a.get("join") and items:
            _print_items(items, pad)
            items = []
        click.echo(
            f"{pad}{a['action']}: {a['status']}"
            + (f" ({a['reason']})" if a["reason"] else "")
            + f"  ${a['cost_usd']:.6f}"
        )
        if a.get("detail"):
            click.echo(f"{pad}  {a['detail']}")
        if a.get("checks"):
            verdicts = ", ".join(f"{n} {'pass' if ok else 'FAIL'}" for n, ok in a["checks"].items())
            click.echo(f"{pad}  checks: {verdicts}")
        for t in a["attempts"]:
            judge = " (judge)" if t.get("origin") == "judge" else ""
            click.echo(
                f"{pad}  attempt {t['attempt']}{judge}: {t['status']} in {t['latency_ms']:.0f} ms, "
                + _attempt_usage(t)
                + (f", request id {t['request_id']}" if t.get("request_id") else "")
                + (f" - {_last_line(t['error'])}" if t["error"] else "")
            )
        _print_turns(a.get("turns") or [], pad + "  ")
        if a.get("output") is not None:
            click.echo(f"{pad}  output: {json.dumps(a['output'], ensure_ascii=False)[:300]}")
    _print_items(items, pad)


def _print_turns(turns: list[dict[str, Any]], pad: str) -> None:
    """A tool loop turn by turn: each model turn's calls with their arguments, then each
    call's result (or error); the final answer is the action's output."""
    n = 0
    for t in turns:
        if t["kind"] == "model":
            n += 1
            calls = ", ".join(f"{c['name']}({c['arguments']})" for c in t["tool_calls"])
            said = f' saying "{t["text"][:200]}"' if t.get("text") else ""
            click.echo(f"{pad}turn {n}: calls {calls}{said}")
        else:
            what = f"error: {t['error']}" if t.get("error") else str(t["content"])[:300]
            click.echo(f"{pad}  result of {t['name']}: {what}")


def _attempt_usage(t: dict[str, Any]) -> str:
    """An attempt's tokens: input and output, then each other count that is not zero
    (cache reads and writes, reasoning — a part of the output —, server-tool uses)."""
    text = f"{t['input_tokens']} in + {t['output_tokens']} out tokens"
    parts = [f"{label} {t[key]:,}" for key, label in _TOKEN_DETAILS if t.get(key)]
    parts += [f"{name} x{n}" for name, n in sorted((t.get("server_tools") or {}).items())]
    return text + (f" ({', '.join(parts)})" if parts else "")


_TOKEN_DETAILS = (
    ("cached_tokens", "cache read"),
    ("cache_write_tokens", "cache write"),
    ("reasoning_tokens", "reasoning"),
)


def _print_items(items: list[dict[str, Any]], pad: str) -> None:
    for item in items:
        click.echo(f"{pad}item {shown(item['key'])}: {item['status']}  ${item['cost_usd']:.6f}")
        _print_units(item, pad + "  ")


def _last_line(text: str) -> str:
    """A traceback's last line names the exception; the whole one is printed once, under errors."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


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


def print_store_info(doc: dict[str, Any]) -> None:
    """``agac store info`` in words."""
    click.echo(f"store: {doc['store']} ({doc['kind']})")
    if doc["kind"] == "sqlite":
        click.echo(
            f"  file {doc['path']}: {_bytes(doc['bytes'])}"
            if doc["exists"]
            else f"  file {doc['path']}: not created yet (the first run creates it)"
        )
        return
    if doc["kind"] not in ("object storage", "directory"):
        return
    if not doc["exists"]:
        click.echo("  nothing stored yet (the first `agac run` creates it)")
        return
    owner = doc["owner"]
    if owner is None:
        click.echo("  owner: none (free)")
    else:
        state = "holds it" if doc["owned"] else "its lease has expired"
        until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(doc["lease_expires_at"]))
        click.echo(
            f"  owner: pid {owner['pid']} on {owner['host']} ({state}; lease to {until} "
            "unless renewed)"
        )
    snap, log = doc["snapshot"], doc["log"]
    if snap is not None:
        click.echo(
            f"  snapshot: {_bytes(snap['bytes'])}, taken {_age(doc['snapshot_age_seconds'])} ago"
        )
    click.echo(
        f"  log: {log['segments']} segments in {log['generations']} generations, "
        f"{_bytes(log['bytes'])}"
    )
    click.echo(
        f"  size: {_bytes(doc['bytes'])}; working copy on this machine: {doc['working_copy']}"
    )


def _bytes(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def print_plan(doc: dict[str, Any]) -> None:
    click.echo(f"plan for {doc['workflow']}: {doc['records']:,} records, nothing sent")
    table = new_table(
        "action",
        "kind",
        "mode",
        "units>",
        "requests>",
        "reusable>",
        "input tokens>",
        "output tokens>",
        "online>",
        "batch>",
        "flex>",
        "online cached>",
        "batch cached>",
    )
    for name, a in doc["actions"].items():
        cost = a["cost_usd"]
        unpriced = a.get("price") == "unpriced"
        table.add_row(
            name,
            a["kind"],
            _plan_mode(a),
            f"{a['units']:,}",
            f"{a['requests']:,}",
            f"{a['reusable']:,}",
            f"{a['input_tokens']:,}",
            f"{a['output_tokens']:,}",
            *(
                ("unpriced",) * 5
                if unpriced
                else (
                    f"${cost['online']:.4f}",
                    f"${cost['batch']:.4f}",
                    _usd_or_dash(cost.get("flex")),
                    f"${cost['online_cached']:.4f}",
                    f"${cost['batch_cached']:.4f}",
                )
            ),
        )
    print_table(table)
    for name in doc.get("unpriced") or ():
        click.echo(
            f"  {name}: model {doc['actions'][name]['model']} is unpriced (no known price): "
            "its cost is not in the estimate; `agac validate` says why and how to price it"
        )
    for name, a in doc["actions"].items():
        if a.get("mode_why"):
            click.echo(f"  {name}: run_mode auto would choose {a['mode']} now ({a['mode_why']})")
    prefixes = [
        f"{n} {a['cache_prefix_tokens']:,}"
        for n, a in doc["actions"].items()
        if a.get("cache_prefix_tokens")
    ]
    click.echo(
        "  cached: "
        + (
            f"static prefix tokens {', '.join(prefixes)}; the first request "
            "writes the cache, every later one reads it"
            if prefixes
            else "no action has a static prefix to cache (same cost)"
        )
    )
    unknown = [name for name, a in doc["actions"].items() if a.get("items_unknown")]
    if unknown:
        click.echo(
            f"  ({', '.join(unknown)}: one item per parent counted — the number of fan-out "
            "items is known only once the list is produced; give the list a maxItems to "
            "bound it)"
        )
    c = doc["cost_usd"]
    click.echo(
        f"estimate (worst case: every answer at max_tokens): {doc['requests']:,} requests, "
        f"{doc['reusable']:,} answers reused; online ${c['online']:.4f}, batch "
        f"${c['batch']:.4f}, flex {_usd_or_dash(c.get('flex'))}, online cached "
        f"${c['online_cached']:.4f}, batch cached ${c['batch_cached']:.4f}, as configured "
        f"${c['as_configured']:.4f}"
    )
    if doc.get("budget"):
        b = doc["budget"]
        verdict = "within" if doc["within_budget"] else "OVER"
        click.echo(
            f"budget usd={b['usd']} tokens={b['tokens']}: {verdict} the budget"
            + (
                ""
                if doc["within_budget"]
                else "; `agac run` refuses it unless --allow-over-estimate"
            )
        )
    if doc.get("estimates"):
        click.echo(f"estimated: {doc['estimates']}")


def _usd_or_dash(value: float | None) -> str:
    """An estimate, or ``—`` where there is none (a model not served on flex)."""
    return "—" if value is None else f"${value:.4f}"


def _plan_mode(action: dict[str, Any]) -> str:
    """``batch``, ``online``, or ``auto → batch`` for an action whose mode auto chooses."""
    mode = action.get("mode") or action["run_mode"] or ""
    return f"auto → {mode}" if action["run_mode"] == "auto" else mode


def attachment_line(a: dict[str, Any]) -> str:
    """One attachment of a rendered request as people read it — never its bytes:
    ``[file] invoice.pdf: application/pdf, 12,345 bytes, 3 pages, sha256:…``."""
    extra = ""
    if a.get("pages") is not None:
        extra = f", {a['pages']} page{'s' if a['pages'] != 1 else ''}"
    elif a.get("width") and a.get("height"):
        extra = f", {a['width']}×{a['height']} px"
    return (
        f"[file] {a.get('name') or a.get('path')}: {a['media_type']}, {a['size']:,} bytes"
        f"{extra}, sha256:{a['sha256']}"
    )


def cache_line(c: dict[str, Any]) -> str:
    """A rendered request's prompt caching in one line: its static prefix and the hint
    it carries (``cache: auto`` marks a prefix whose estimate reaches the minimum)."""
    where = (
        "the system prompt and " if c["system"] else ""
    ) + f"the first {c['static_chars']:,} characters of the prompt"
    size = f"static prefix: {where} (~{c['prefix_tokens']:,} tokens)"
    if c["mode"] == "off":
        return f"{size}; cache: off, no hint"
    if c["minimum"] is None:
        return f"{size}; no hint: agac cannot ask this provider to cache"
    if not c["hint"]:
        return f"{size}; no hint (cache: {c['mode']}): under the minimum of {c['minimum']:,}"
    return f"{size}; hint: cache {c['mode']}, ttl {c['ttl']} (minimum {c['minimum']:,} tokens)"
