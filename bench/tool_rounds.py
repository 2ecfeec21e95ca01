"""Tools per record: a batch action with a lookup tool, in rounds, against the emulator.

Usage: python bench/tool_rounds.py [--records 10000] [--port 18791] [--no-online]

One fresh project under bench/out/tool-rounds-<records>/ with one llm action
(``openai/gpt-4o-mini``, ``run_mode: batch``, ``tools: [tools.orders:lookup]``) over one
JSONL file: 40 % of the records ask for one call (``[[emulator calls: …]]``), 10 % for
two calls in two turns, the rest none. The emulator (``agac emulator``) and every
``agac run`` are separate processes; each run is reaped with ``os.wait4`` so its CPU
seconds (user + system), wall time and peak RSS are its own. Between runs the emulator's
clock moves two hours, so the batch out has ended.

Checks: three rounds (batches), every record answered, the ledger's model turns equal to
what the emulator answered (none twice), each call run once. Then, unless
``--no-online``, the same workflow online in a second project, for the cost beside it.
Prints one JSON line per run and a summary line. Results go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _emulator

OUT = Path(__file__).parent / "out"
AGAC = [sys.executable, "-m", "agac.cli.main"]
BATCH_SECONDS = 3600
WORKFLOW = """\
name: rounds
input: {{path: data/}}
defaults: {{model: openai/gpt-4o-mini, max_tokens: 256, run_mode: {mode}}}
actions:
  - name: reply
    prompt: "Answer the customer: {{{{ source.text }}}}"
    tools: [tools.orders:lookup]
"""
TOOLS = '''\
"""The benchmark's lookup tool: each call appends its argument to calls.log."""

from pathlib import Path


def lookup(order_id: str) -> dict:
    """Find an order in the shop's system."""
    with (Path(__file__).parent.parent / "calls.log").open("a", encoding="utf-8") as log:
        log.write(order_id + "\\n")
    return {"order": order_id, "status": "shipped"}
'''


def text(i: int) -> str:
    """Record ``i``: 40 % one call, 10 % two calls in two turns, 50 % none."""
    kind = i % 10
    if kind < 4:
        return f'where is order {i}? [[emulator calls: lookup {{"order_id": "A{i}"}}]]'
    if kind == 4:
        return (
            f'orders {i} and its return [[emulator calls: lookup {{"order_id": "B{i}"}}]] '
            f'[[emulator calls: lookup {{"order_id": "C{i}"}}]]'
        )
    return f"thank you for order {i}"


def make_project(records: int, mode: str) -> Path:
    root = OUT / f"tool-rounds-{records}-{mode}"
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "tools" / "__init__.py").write_text("")
    (root / "tools" / "orders.py").write_text(TOOLS)
    (root / "agac.yml").write_text("")
    (root / "wf.yml").write_text(WORKFLOW.format(mode=mode))
    with (root / "data" / "orders.jsonl").open("w") as out:
        out.writelines(json.dumps({"id": i, "text": text(i)}) + "\n" for i in range(records))
    return root


def run_agac(root: Path, env: dict[str, str]) -> dict[str, Any]:
    """One ``agac run wf.yml --json``: its exit code, wall, CPU, peak RSS and summary."""
    t0 = time.perf_counter()
    with open(root / "stdout.txt", "w") as out, open(root / "stderr.txt", "w") as err:
        proc = subprocess.Popen(
            [*AGAC, "run", "wf.yml", "--json"], cwd=root, stdout=out, stderr=err, env=env
        )
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 75):
        raise SystemExit(f"agac run exited {code}:\n{(root / 'stderr.txt').read_text()[-3000:]}")
    return {
        "exit": code,
        "wall_s": round(time.perf_counter() - t0, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "maxrss_mb": round(usage.ru_maxrss / 1024, 1),
        "summary": json.loads((root / "stdout.txt").read_text()),
    }


def ledger(root: Path) -> dict[str, int]:
    with sqlite3.connect(root / ".agac" / "agac.db") as db:
        rows = db.execute("SELECT kind, tier, COUNT(*) FROM usage GROUP BY kind, tier").fetchall()
    return {f"{kind}:{tier}": n for kind, tier, n in rows}


def batch_case(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    root = make_project(args.records, "batch")
    runs: list[dict[str, Any]] = []
    while not runs or runs[-1]["exit"] == 75:
        runs.append(run_agac(root, env))
        print(json.dumps({k: v for k, v in runs[-1].items() if k != "summary"}), flush=True)
        if runs[-1]["exit"] == 75:
            _emulator.control(args.port, "POST", "/_emulator/clock", {"advance": 2 * BATCH_SECONDS})
        if len(runs) > 8:
            raise SystemExit("more runs than rounds: the loop did not end")
    stats = _emulator.control(args.port, "GET", "/_emulator/stats")
    summary = runs[-1]["summary"]
    calls = (root / "calls.log").read_text().split()
    counted = ledger(root)
    return {
        "case": f"{args.records:,} records, batch rounds",
        "state": summary["state"],
        "answered": summary["actions"]["reply"]["answered"],
        "rounds": stats["requests"]["openai"].get("batch.create", 0),
        "runs": len(runs),
        "cpu_s": round(sum(r["cpu_s"] for r in runs), 3),
        "wall_s": round(sum(r["wall_s"] for r in runs), 3),
        "maxrss_mb": max(r["maxrss_mb"] for r in runs),
        "model_turns_ledgered": counted.get("llm:batch", 0),
        "model_turns_emulator": stats["answered"],
        "duplicate_answers": stats["duplicate_answers"],
        "tool_calls_run": len(calls),
        "tool_calls_distinct": len(set(calls)),
        "cost_usd": summary["cost_usd"],
    }


def online_case(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    _emulator.control(args.port, "DELETE", "/_emulator/stats")
    root = make_project(args.records, "online")
    done = run_agac(root, env)
    stats = _emulator.control(args.port, "GET", "/_emulator/stats")
    return {
        "case": f"{args.records:,} records, online",
        "state": done["summary"]["state"],
        "answered": done["summary"]["actions"]["reply"]["answered"],
        "cpu_s": done["cpu_s"],
        "wall_s": done["wall_s"],
        "maxrss_mb": done["maxrss_mb"],
        "model_turns_emulator": stats["answered"],
        "cost_usd": done["summary"]["cost_usd"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--port", type=int, default=18791)
    parser.add_argument("--no-online", dest="online", action="store_false")
    args = parser.parse_args()
    from agac.emulator.env import variables

    OUT.mkdir(exist_ok=True)
    env = {**os.environ, **variables(args.port)}
    emulator = _emulator.start_emulator(args.port, batch_seconds=BATCH_SECONDS)
    try:
        batch = batch_case(args, env)
        print(json.dumps(batch), flush=True)
        if args.online:
            online = online_case(args, env)
            print(json.dumps(online), flush=True)
            saved = 1 - batch["cost_usd"] / online["cost_usd"] if online["cost_usd"] else 0.0
            print(json.dumps({"batch_vs_online_saving": round(saved, 4)}), flush=True)
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)


if __name__ == "__main__":
    main()
