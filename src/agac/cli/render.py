"""Terminal rendering for the CLI: progress bars, summaries, sessions, costs.

Rich draws on stderr only when it is a terminal; otherwise progress is a plain
line every few seconds. Nothing here talks to the store or providers directly.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import click

__all__ = ["ProgressView", "follow_events", "print_cost", "print_event", "print_plan",
           "print_runs", "print_session", "print_summary"]


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
        )

        console = Console(stderr=True)
        with Progress(TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[extra]}"), TimeElapsedColumn(), console=console,
                      transient=False) as bars:
            tasks = {a: bars.add_task(a, total=_total(progress, a), extra="") for a in progress.actions}
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
        last = ""
        while not self._stop.wait(5.0):
            line = "  ".join(f"{a} {progress.done(a)}/{_total(progress, a)}"
                             + (f" ({progress.batches[a]})" if progress.batches.get(a) else "")
                             for a in progress.actions)
            if line != last:
                click.echo(f"progress: {line}", err=True)
                last = line


def _total(progress: Any, action: str) -> int:
    """An action's units so far: fan-outs add their items as parents fan out."""
    return int(getattr(progress, "totals", {}).get(action, progress.total))


def print_summary(summary: dict[str, Any], interrupted: bool = False) -> None:
    state = summary["state"]
    click.echo(f"run {summary['run_id']} of {summary['workflow']}: {state}"
               + (f" (retry of {summary['retry_of']})" if summary.get("retry_of") else ""))
    reused = calls = failed = 0
    for name, a in summary["actions"].items():
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(a["reasons"].items()))
        click.echo(f"  {name:<16} {a['answered']:>7} answered {a['failed']:>6} failed "
                   f"{a['skipped']:>6} skipped {a['pending']:>6} pending   calls {a['calls']}"
                   f"{' tool ' + str(a['tool_calls']) if a['tool_calls'] else ''}"
                   f"  reused {a['reused']}  ${a.get('cost_usd', 0):.4f}"
                   + (f"  [{reasons}]" if reasons else ""))
        reused += a["reused"]
        calls += a["calls"]
        failed += a["failed"]
    words = f"reused {reused:,} answers, {calls:,} calls, cost ${summary['cost_usd']:.4f}"
    if failed:
        words += f"; {failed:,} failed"
    if interrupted:
        words += "; interrupted: what was in flight is saved"
    if summary.get("error"):
        click.echo(f"  error: {summary['error']}")
    if summary.get("deadline_at"):
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(summary["deadline_at"]))
        click.echo(f"  deadline {at}")
    held = [s for s in summary.get("shards") or [] if s["owner"]]
    if held:
        click.echo(f"  shards held by workers ({len(held)} of {len(summary['shards'])}):")
        for s in held:
            click.echo(f"    {s['kind']:6} {s['shard']}  {s['owner']}")
    waiting = summary.get("awaiting_approval")
    if waiting:
        per = ", ".join(f"{a} {n}" for a, n in sorted(waiting["actions"].items()))
        click.echo(f"  awaiting approval: {waiting['units']} units ({per})")
        for p in waiting["proposals"][:10]:
            click.echo(f"    {p['id']}  {p['action']}  {p['record']}")
        if waiting["units"] > 10:
            click.echo(f"    ... `agac approvals list {summary['workflow']}` shows all")
    for key in summary.get("effects_unknown") or []:
        click.echo(f"  effect {key[:12]} is unknown (it may or may not have happened): "
                   f"agac effects resolve {key[:12]} --done|--not-done")
    if summary.get("budget"):
        b = summary["budget"]
        cap = ", ".join(x for x in (f"${b['usd']:g}" if b.get("usd") is not None else "",
                                    f"{b['tokens']:,} tokens" if b.get("tokens") is not None
                                    else "") if x)
        click.echo(f"  budget {cap}: spent ${b['spent_usd']:.4f}, {b['spent_tokens']:,} tokens")
    click.echo(words + (f": {summary['next']}" if summary.get("next") else ""))


def print_runs(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["created_at"]))
        extra = f" retry of {r['retry_of']}" if r["retry_of"] else ""
        click.echo(f"{r['run_id']}  {r['workflow']:<20} {r['state']:<12} {started}{extra}")


def print_event(e: dict[str, Any]) -> None:
    when = time.strftime("%H:%M:%S", time.localtime(e["created_at"]))
    where = " ".join(x for x in (e.get("action"), e.get("unit_key")) if x)
    data = {k: v for k, v in (e.get("data") or {}).items() if k != "traceback"}
    if e["kind"] == "progress" and isinstance(data.get("actions"), dict):
        parts = [f"{name} {a['answered'] + a['failed'] + a['skipped']}/{a['records']}"
                 + (f" ({a['failed']} failed)" if a["failed"] else "")
                 for name, a in data["actions"].items()]
        click.echo(f"{e['id']:>6} {when} {'progress':<16} {'; '.join(parts)}  "
                   f"${float(data.get('cost_usd') or 0):.4f}")
        return
    click.echo(f"{e['id']:>6} {when} {e['kind']:<16} {where} {json.dumps(data, default=str)}")


def follow_events(ref: str | None, as_json: bool) -> None:
    """Replay a run's events, then stream new ones until the run is final (R3)."""
    from agac import api

    last = 0
    while True:
        for e in api.events(ref, after=last):
            last = e["id"]
            if as_json:
                click.echo(json.dumps(e, default=str), err=True)
            else:
                print_event(e)
        if api.is_final(api.status(ref)["state"]):
            return
        time.sleep(0.5)


def print_session(doc: dict[str, Any]) -> None:
    click.echo(f"record {doc['key']} of {doc['workflow']} (run {doc['run_id']}): {doc['status']}"
               f"  ${doc['cost_usd']:.6f}")
    rec = doc.get("record")
    if rec:
        click.echo(f"  from {rec['file']} line {rec['line']}")
        if rec.get("error"):
            click.echo(f"  invalid: {rec['error']}")
    if doc.get("failed_items"):
        click.echo(f"  failed items: {', '.join(doc['failed_items'])}")
    _print_units(doc, "  ")
    for e in doc["errors"]:
        tb = e["data"].get("traceback")
        where = f" ({e['unit_key']})" if e.get("unit_key") and e["unit_key"] != doc["key"] else ""
        click.echo(f"  error in {e['action']}{where}: {e['data'].get('reason')}: "
                   f"{e['data'].get('detail')}")
        if tb:
            click.echo("    " + tb.rstrip().replace("\n", "\n    "))


def _print_units(doc: dict[str, Any], pad: str) -> None:
    """A unit's actions, with its fan-out items (indented) before the first join."""
    items = list(doc.get("items", []))
    for a in doc["actions"]:
        if a.get("join") and items:
            _print_items(items, pad)
            items = []
        click.echo(f"{pad}{a['action']}: {a['status']}" + (f" ({a['reason']})" if a["reason"] else "")
                   + f"  ${a['cost_usd']:.6f}")
        if a.get("detail"):
            click.echo(f"{pad}  {a['detail']}")
        for t in a["attempts"]:
            click.echo(f"{pad}  attempt {t['attempt']}: {t['status']} in {t['latency_ms']:.0f} ms, "
                       f"{t['input_tokens']}+{t['output_tokens']} tokens"
                       + (f" - {_last_line(t['error'])}" if t["error"] else ""))
        if a.get("output") is not None:
            click.echo(f"{pad}  output: {json.dumps(a['output'], ensure_ascii=False)[:300]}")
    _print_items(items, pad)


def _print_items(items: list[dict[str, Any]], pad: str) -> None:
    for item in items:
        click.echo(f"{pad}item {item['key']}: {item['status']}  ${item['cost_usd']:.6f}")
        _print_units(item, pad + "  ")


def _last_line(text: str) -> str:
    """A traceback's last line names the exception; the whole one is printed once, under errors."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def print_cost(doc: dict[str, Any]) -> None:
    click.echo(f"run {doc['run_id']} of {doc['workflow']}: ${doc['cost_usd']:.6f}"
               f" (batch saved ${doc['batch_saved_usd']:.6f})")
    for r in doc["rows"]:
        click.echo(f"  {r['action']:<16} {r['provider']}/{r['model']:<28} {r['tier']:<5} "
                   f"{r['calls']:>7} calls {r['input_tokens']:>9} in {r['output_tokens']:>9} out "
                   f"${r['cost_usd']:.6f}")


def print_plan(doc: dict[str, Any]) -> None:
    click.echo(f"plan for {doc['workflow']}: {doc['records']:,} records, nothing sent")
    for name, a in doc["actions"].items():
        click.echo(f"  {name:<16} {a['kind']:<4} {a['run_mode'] or '':<6} {a['units']:>7} units "
                   f"{a['requests']:>7} requests {a['reusable']:>7} reusable "
                   f"{a['input_tokens']:>9} in {a['output_tokens']:>9} out  "
                   f"online ${a['cost_usd']['online']:.4f}  batch ${a['cost_usd']['batch']:.4f}")
    unknown = [name for name, a in doc["actions"].items() if a.get("items_unknown")]
    if unknown:
        click.echo(f"  ({', '.join(unknown)}: one item per parent counted — the number of fan-out "
                   "items is known only once the list is produced; give the list a maxItems to "
                   "bound it)")
    c = doc["cost_usd"]
    click.echo(f"estimate (worst case: every answer at max_tokens): {doc['requests']:,} requests, "
               f"{doc['reusable']:,} answers reused; online ${c['online']:.4f}, batch "
               f"${c['batch']:.4f}, as configured ${c['as_configured']:.4f}")
    if doc.get("budget"):
        b = doc["budget"]
        verdict = "within" if doc["within_budget"] else "OVER"
        click.echo(f"budget usd={b['usd']} tokens={b['tokens']}: {verdict} the budget"
                   + ("" if doc["within_budget"] else
                      "; `agac run` refuses it unless --allow-over-estimate"))
