"""Issue 7 benchmark: scale-out workers on one PostgreSQL.

Usage: python bench/workers.py [--records 20000] [--workers 1,3] [--concurrency 4]
                               [--store postgresql://…]

One project under bench/out/workers/ with a single tool action that takes 20 ms per
record (an external call, simulated by ``time.sleep(0.02)``) over ONE input file of
``--records`` records (20 shards of 1,000). For each worker count, a fresh database on the
server (``--store``'s, or a throwaway server started with tests/pg.py) gets the run by
``agac submit``; then N ``agac worker --concurrency 4 --exit-when-done --json`` processes
run until the run is final. Measured from the store's events: the first ``shard_claimed``
to ``run_ended`` (throughput = records / that time), and from the workers' reports the
time of each claim: its database time (server clock, start of its first statement to the
end of its last) and its wall time as the worker saw it. Prints one JSON line
per case and the speed-up; results go to docs/performance.md (today) and bench/HISTORY.md (every measurement) ("Scale-out workers").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

OUT = Path(__file__).parent / "out" / "workers"
AGAC = [sys.executable, "-m", "agac.cli.main"]
WORKFLOW = """\
name: workers_bench
input: {path: data/}
actions:
  - name: call
    kind: tool
    function: tools:external
"""
TOOL = """\
import time


def external(inputs, ctx):
    time.sleep(0.02)  # an external call of 20 ms
    return {"ok": inputs["source"]["n"]}
"""


def _project(records: int) -> Path:
    shutil.rmtree(OUT, ignore_errors=True)
    (OUT / "data").mkdir(parents=True)
    (OUT / "agac.yml").write_text("", encoding="utf-8")
    (OUT / "wf.yml").write_text(WORKFLOW, encoding="utf-8")
    (OUT / "tools.py").write_text(TOOL, encoding="utf-8")
    with open(OUT / "data" / "records.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"n": n, "text": f"record {n}"}) + "\n" for n in range(records))
    return OUT


def _database(server_url: str) -> str:
    name = f"agac_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    head = server_url.split("?")[0].rsplit("/", 1)[0]
    return f"{head}/{name}"


def _case(
    root: Path, server_url: str, workers: int, concurrency: int, records: int
) -> dict[str, Any]:
    url = _database(server_url)
    env = {**os.environ, "AGAC_STORE": url}
    sub = subprocess.run(
        [*AGAC, "submit", "wf.yml", "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    run_id = json.loads(sub.stdout)["run_id"]
    load_before = os.getloadavg()[0]
    started = time.time()
    procs = [
        subprocess.Popen(
            [
                *AGAC,
                "worker",
                "--concurrency",
                str(concurrency),
                "--exit-when-done",
                "--poll",
                "0.5",
                "--json",
            ],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(workers)
    ]
    reports = [json.loads(p.communicate()[0]) for p in procs]
    wall = time.time() - started
    with psycopg.connect(url) as conn:
        first, ended = conn.execute(
            "SELECT min(created_at) FILTER (WHERE kind = 'shard_claimed'), "
            "max(created_at) FILTER (WHERE kind = 'run_ended') FROM events WHERE run_id = %s",
            (run_id,),
        ).fetchone()
        state, answered = conn.execute(
            "SELECT r.state, (SELECT count(*) FROM outcomes o WHERE o.run_id = r.id AND o.status = 'answered') "
            "FROM runs r WHERE r.id = %s",
            (run_id,),
        ).fetchone()
    claims = [c for r in reports for c in [r["claim_ms"]] if c["count"]]
    seconds = float(ended) - float(first)
    return {
        "case": f"{workers}x{concurrency}",
        "workers": workers,
        "concurrency": concurrency,
        "records": records,
        "state": state,
        "answered": answered,
        "run_seconds": round(seconds, 2),
        "records_per_s": round(records / seconds, 1),
        "wall_s": round(wall, 2),
        "claims": sum(c["count"] for c in claims),
        "claim_ms_mean": round(
            sum(c["mean"] * c["count"] for c in claims) / max(1, sum(c["count"] for c in claims)), 3
        ),
        "claim_ms_max": max(c["max"] for c in claims),
        "claim_db_ms_mean": round(
            sum(
                r["claim_db_ms"]["mean"] * r["claim_db_ms"]["count"]
                for r in reports
                if r["claim_db_ms"]["count"]
            )
            / max(1, sum(c["count"] for c in claims)),
            3,
        ),
        "claim_db_ms_max": max(
            r["claim_db_ms"]["max"] for r in reports if r["claim_db_ms"]["count"]
        ),
        "loadavg_1m_before": round(load_before, 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--workers", default="1,3")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--store", default=None, help="a PostgreSQL URL whose user may create databases"
    )
    args = parser.parse_args()
    root = _project(args.records)
    server = None
    url = args.store
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pg import start_server  # the test suite's throwaway server

        server = start_server(None)
        url = server.url
    try:
        results = []
        for n in (int(x) for x in args.workers.split(",")):
            results.append(_case(root, url, n, args.concurrency, args.records))
            print(json.dumps(results[-1]), flush=True)
        if len(results) > 1:
            base = results[0]["records_per_s"]
            print(
                json.dumps(
                    {"speedup": {r["case"]: round(r["records_per_s"] / base, 2) for r in results}}
                )
            )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
