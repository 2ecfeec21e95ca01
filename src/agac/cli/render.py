"""Terminal rendering for the CLI: progress bars, summaries, sessions, tables.

Rich draws progress on stderr only when it is a terminal; otherwise progress is a plain
line every few seconds. Lists are tables (cli/tables.py); a run's summary and its cost are
the typed run report's (cli/report.py), re-exported here. Nothing here talks to the store
or providers directly.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import click

from agac.cli.report import no_process_line, print_cost, print_summary
from agac.cli.tables import new_table, print_table, shown, when

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
        _print_citations((a.get("response") or {}).get("citations") or [], pad + "  ")
    _print_items(items, pad)


def _print_citations(citations: list[dict[str, Any]], pad: str) -> None:
    """The sources an answer cites from the provider's web search, one a line: its
    address, title and the text it supports."""
    for n, c in enumerate(citations, start=1):
        title = f" ({c['title']})" if c.get("title") else ""
        said = f': "{c["cited_text"][:200]}"' if c.get("cited_text") else ""
        click.echo(f"{pad}[{n}] {c['url']}{title}{said}")


def _print_turns(turns: list[dict[str, Any]], pad: str) -> None:
    """A tool loop turn by turn: each model turn's calls with their arguments, then each
    call's result (or error, with its code), an effect's id and state with it, a web
    search's hits by address; the final answer is the action's output."""
    n = 0
    for t in turns:
        if t["kind"] == "model":
            n += 1
            calls = ", ".join(f"{c['name']}({c['arguments']})" for c in t["tool_calls"])
            said = f' saying "{t["text"][:200]}"' if t.get("text") else ""
            click.echo(f"{pad}turn {n}: calls {calls}{said}")
        else:
            code = f" ({t['code']})" if t.get("code") else ""
            what = f"error{code}: {t['error']}" if t.get("error") else _result(t)
            effect = t.get("effect")
            tag = f" (effect {effect['id'][:12]}, {effect['state']})" if effect else ""
            click.echo(f"{pad}  result of {t['name']}{tag}: {what}")


def _result(t: dict[str, Any]) -> str:
    """A call's result as shown: a web search's hits by address, another's content."""
    hits = t.get("hits")
    if isinstance(hits, list):
        return f"{len(hits)} results: " + ", ".join(str(h["url"]) for h in hits)[:300]
    return str(t["content"])[:300]


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


def _cheaper_hours(model: str, c: dict[str, Any]) -> str:
    """When an action's model is next cheaper (a price calendar), in one line."""
    hours, minutes = divmod(max(0, int(c["opens_in_s"])) // 60, 60)
    named = f"{c['name']}, " if c.get("name") else ""
    return (
        f"{model} is cheaper {named}{c['hours']}, opening in {hours} h {minutes:02d} min: "
        f"online ${c['online_usd_then']:.4f} then instead of ${c['online_usd_now']:.4f} now"
    )


def _shared_said(shared: int) -> str:
    """The plan's identical requests a run sends once (S5), when there are any."""
    return f", {shared:,} identical requests sent once and shared" if shared else ""


def print_plan(doc: dict[str, Any]) -> None:
    click.echo(f"plan for {doc['workflow']}: {doc['records']:,} records, nothing sent")
    table = new_table(
        "action",
        "kind",
        "mode",
        "units>",
        "requests>",
        "reusable>",
        "shared>",
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
            f"{a['shared']:,}",
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
    for name, a in doc["actions"].items():
        if a.get("cheaper_hours"):
            click.echo(f"  {name}: {_cheaper_hours(a['model'], a['cheaper_hours'])}")
            if a["cheaper_hours"].get("auto_waits"):
                saves = a["cheaper_hours"]["auto_saves_usd"]
                click.echo(
                    f"  {name}: run_mode auto will wait for them (the deadline allows), "
                    f"saving about ${saves:.4f}"
                )
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
    for name, a in doc["actions"].items():
        if a.get("shared"):
            click.echo(
                f"  {name}: {a['shared']:,} of its requests are identical to another one: a "
                "run sends each once, online or in a batch, and shares its answer (reused)"
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
        f"{doc['reusable']:,} answers reused{_shared_said(doc['shared'])}; online ${c['online']:.4f}, batch "
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
