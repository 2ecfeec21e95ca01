"""Issue 14 benchmarks: `agac serve` pages on a big store, and a run page following a fast run.

Usage: python bench/service.py [runs_page] [follow]

- runs_page: a SQLite store with 10,000 runs (each 20 outcomes and 10 usage rows; 1 in 20
  still running with progress events, each of its own workflow: a tenant has one open run
  of a workflow); GET /runs (50 a page) through the real app on a
  loopback port, signed in: median and p95 wall per page, first page, a deep page and a
  state filter. Target: <= 200 ms.
- follow: `agac run` of 30,000 records on the mock provider at ~1,000 calls/s in a
  subprocess while a client follows the run page's live stream (/runs/{id}/live); for
  each progress event the store got, when its bars reached the client (lag), and how long
  after the run ended the final view arrived.

Each case prints one JSON line. Results go to docs/performance.md (today) and bench/HISTORY.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "service"))

from service_support import PASSWORD, running_service, team_project

from agac import api
from agac.jsontext import dumps
from agac.store import tables as t

OUT = Path(__file__).parent / "out"
AGAC = [sys.executable, "-m", "agac.cli.main"]


def _fresh(name: str) -> Path:
    root = OUT / name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    return root


def _signed_in(url: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=60)
    page = client.get("/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    r = client.post(
        "/login",
        data={"username": "ann", "password": PASSWORD, "csrf_token": token},
        headers={"Origin": url},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    return client


def _times(client: httpx.Client, path: str, n: int) -> dict[str, float]:
    client.get(path)  # warm
    walls = []
    for _ in range(n):
        start = time.perf_counter()
        r = client.get(path)
        walls.append((time.perf_counter() - start) * 1000)
        assert r.status_code == 200, r.status_code
    walls.sort()
    return {
        "median_ms": round(statistics.median(walls), 1),
        "p95_ms": round(walls[int(len(walls) * 0.95) - 1], 1),
    }


def runs_page(n_runs: int = 10_000) -> dict[str, Any]:
    root = team_project(
        _fresh("service_runs"), rows=[{"id": f"r{i}", "text": "t"} for i in range(10)]
    )
    first = api.run("replies", root)
    with running_service(root) as service:
        store = service.store
        with store.engine.begin() as conn:
            base = dict(conn.execute(sa.select(t.runs)).first()._mapping)  # type: ignore[union-attr]
            outcomes = [
                dict(r._mapping)
                for r in conn.execute(
                    sa.select(t.outcomes).where(t.outcomes.c.run_id == base["id"])
                ).all()
            ]
            usage = [
                dict(r._mapping)
                for r in conn.execute(
                    sa.select(t.usage).where(t.usage.c.run_id == base["id"])
                ).all()
            ]
            now = time.time()
            for start in range(0, n_runs, 500):
                runs, outs, uses, events = [], [], [], []
                for i in range(start, min(start + 500, n_runs)):
                    rid = f"bench{i:06d}"
                    running = i % 20 == 0
                    # at most one open run per (tenant, workflow): the running ones get their own
                    runs.append(
                        {
                            **base,
                            "id": rid,
                            "created_at": now - n_runs + i,
                            "workflow": f"replies-{i}" if running else base["workflow"],
                            "state": "running" if running else "succeeded",
                            "ended_at": None if running else now - n_runs + i + 1,
                        }
                    )
                    outs += [{**o, "run_id": rid} for o in outcomes]
                    uses += [
                        {**{k: v for k, v in u.items() if k != "id"}, "run_id": rid} for u in usage
                    ]
                    if running:
                        events.append(
                            {
                                "run_id": rid,
                                "kind": "progress",
                                "action": None,
                                "unit_key": None,
                                "created_at": now,
                                "data": dumps(
                                    {
                                        "scope": "run",
                                        "cost_usd": 0.01,
                                        "actions": {
                                            "draft": {
                                                "records": 10,
                                                "answered": 7,
                                                "failed": 1,
                                                "skipped": 0,
                                                "cost_usd": 0.01,
                                            },
                                            "send": {
                                                "records": 10,
                                                "answered": 0,
                                                "failed": 0,
                                                "skipped": 0,
                                                "cost_usd": 0.0,
                                            },
                                        },
                                    }
                                ),
                            }
                        )
                conn.execute(t.runs.insert(), runs)
                conn.execute(t.outcomes.insert(), outs)
                conn.execute(t.usage.insert(), uses)
                if events:
                    conn.execute(t.events.insert(), events)
        client = _signed_in(service.url)
        try:
            result = {
                "case": "runs_page",
                "runs": n_runs + 1,
                "first_run_exit": first.exit_code,
                "outcomes_per_run": len(outcomes),
                "usage_per_run": len(usage),
                "page1": _times(client, "/runs", 40),
                "page100": _times(client, "/runs?page=100", 40),
                "state_running": _times(client, "/runs?state=running", 40),
                "api_page1": _times(client, "/runs", 1),
            }
            with service.api("ann") as api_client:
                result["api_page1"] = _times(api_client, "/api/v1/runs", 40)
        finally:
            client.close()
    return result


def follow(records: int = 30_000) -> dict[str, Any]:
    root = team_project(
        _fresh("service_follow"),
        rows=[{"id": f"r{i}", "text": f"message {i}"} for i in range(records)],
        workflow="name: replies\ninput: {path: data/, id_field: id}\n"
        "defaults: {model: mock/m, max_concurrency: 64}\n"
        'actions:\n  - name: draft\n    prompt: "Reply to: {{ source.text }}"\n',
    )
    (root / "agac.yml").write_text("identity: login\nproviders:\n  mock: {latency_ms: 55}\n")
    received: list[tuple[float, int]] = []
    with running_service(root, poll_seconds=0.25) as service:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGAC_")}
        started = time.time()
        proc = subprocess.Popen(
            [*AGAC, "run", "replies", "--json"],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        while not service.store.list_runs(limit=1):
            time.sleep(0.02)
        run_id = service.store.list_runs(limit=1)[0].id
        client = _signed_in(service.url)
        done = threading.Event()

        def listen() -> None:
            with client.stream("GET", f"/runs/{run_id}/live?after=0", timeout=None) as r:
                data: list[str] = []
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        data.append(line[6:])
                    elif line == "" and data:
                        html = "\n".join(data)
                        data = []
                        m = re.search(
                            r'<td>draft</td>.*?<td class="num">([\d,]+)</td>', html, re.DOTALL
                        )
                        if m:
                            received.append((time.time(), int(m.group(1).replace(",", ""))))
                    elif line.startswith("event: end"):
                        break
            done.set()

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        out, _ = proc.communicate(timeout=600)
        ended = time.time()
        done.wait(30)
        client.close()
        summary = json.loads(out)
        events = service.store.iter_events(run_id, 0, limit=100_000)
    progress = [
        (e.created_at, json.loads(e.data)["actions"]["draft"]["answered"])
        for e in events
        if e.kind == "progress"
    ]
    lags = []
    for at, answered in progress:
        seen = next((when for when, n in received if n >= answered), None)
        if seen is not None:
            lags.append(max(seen - at, 0.0) * 1000)
    lags.sort()
    calls = summary["actions"]["draft"]["calls"]
    return {
        "case": "follow",
        "records": records,
        "calls": calls,
        "run_wall_s": round(ended - started, 2),
        "calls_per_s": round(calls / (ended - started), 1),
        "progress_events": len(progress),
        "views_received": len(received),
        "lag_median_ms": round(statistics.median(lags), 1) if lags else None,
        "lag_max_ms": round(max(lags), 1) if lags else None,
        "events_followed": len(lags),
        "final_view_after_end_ms": round((received[-1][0] - ended) * 1000, 1) if received else None,
        "final_answered_seen": received[-1][1] if received else None,
        "answered": summary["actions"]["draft"]["answered"],
    }


CASES = {"runs_page": runs_page, "follow": follow}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(CASES):
        print(json.dumps(CASES[name]()), flush=True)
