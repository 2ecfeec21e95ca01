"""Issue 6 benchmark: fan-out and join on the mock provider at zero latency, SQLite store,
whole-process wall time and peak RSS of `agac run`.

Usage: python bench/fanout.py [records] [items]   (default 1,000 records x 20 items)
Builds a throwaway project under bench/out/fanout/: each record holds `items` clauses; an
llm action fans out over them (one call per item), and an llm join reads every item back
(`fulfilled`) into one call per record. Prints one JSON line; results go to
docs/performance.md.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "out" / "fanout"
AGAC = [sys.executable, "-m", "agac.cli.main"]

WORKFLOW = """
name: fanbench
input: {path: data/, id_field: id}
defaults: {model: mock/bench, max_concurrency: 64}
actions:
  - name: assess
    fan_out: {over: source.clauses, as: clause}
    prompt: "Assess clause: {{ clause }}"
    schema: {type: object, properties: {risk: {enum: [low, medium, high]}}, required: [risk]}
  - name: summary
    dependencies: [assess]
    join: assess
    prompt: "Risks: {% for f in fulfilled %}{{ f.output.risk }} {% endfor %}; failed: {{ rejected | length }}"
"""


def make_project(records: int, items: int) -> Path:
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "data").mkdir(parents=True)
    (OUT / "agac.yml").write_text("")
    (OUT / "wf.yml").write_text(WORKFLOW)
    with (OUT / "data" / "contracts.jsonl").open("w") as f:
        for i in range(records):
            clauses = [
                f"contract {i} clause {j}: the party shall do thing {j * 7 % 31}"
                for j in range(items)
            ]
            f.write(json.dumps({"id": f"c{i:05d}", "clauses": clauses}) + "\n")
    return OUT


def main() -> None:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000
    items = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    root = make_project(records, items)
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        AGAC + ["run", "wf.yml", "--json"], check=False, cwd=root, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"agac run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    s = json.loads(proc.stdout)
    a, j = s["actions"]["assess"], s["actions"]["summary"]
    assert a["answered"] == records * items and j["answered"] == records, s
    print(
        json.dumps(
            {
                "case": f"{records} records x fan-out {items} x llm join, mock 0 ms",
                "wall_s": round(wall, 3),
                "cpu_s": round(
                    (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 3
                ),
                "maxrss_mb": round(after.ru_maxrss / 1024, 1),
                "item_units": a["records"],
                "join_units": j["records"],
                "calls": a["calls"] + j["calls"],
                "load_1m_before": round(load, 2),
                "load_1m_after": round(os.getloadavg()[0], 2),
                "target": "<= 10 s, <= 300 MB",
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
