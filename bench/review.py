"""The quality loop's review pages on a big run: a run of 20,000 records (an llm action with a
schema and a check, the mock provider with a 5 % failure rate), then its answers page through
the real app on a loopback port, signed in: the first page, the last page, each filter, a
search, and the CSV and parquet downloads of every unit.

Usage: python bench/review.py [--records N]

Prints one JSON line: the run's wall time, and per request the median and p95 wall in ms
(downloads: one timing and their size). Results go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "service"))

from review_support import workflow
from service_support import PASSWORD, running_service, team_project

from agac import api

OUT = Path(__file__).parent / "out" / "review"
YML = "identity: login\nproviders:\n  mock: {fail_rate: 0.05}\nprices:\n  mock/m: {input: 2.5, output: 10.0}\n"


def _signed_in(url: str) -> httpx.Client:
    import re

    client = httpx.Client(base_url=url, timeout=120)
    page = client.get("/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    r = client.post(
        "/login",
        data={"username": "ann", "password": PASSWORD, "csrf_token": token},
        headers={"Origin": url},
    )
    assert r.status_code == 303, r.text
    return client


def _times(client: httpx.Client, path: str, n: int = 15) -> dict[str, float]:
    client.get(path)
    walls = []
    for _ in range(n):
        start = time.perf_counter()
        r = client.get(path)
        walls.append((time.perf_counter() - start) * 1000)
        assert r.status_code == 200, (path, r.status_code)
    walls.sort()
    return {
        "median_ms": round(statistics.median(walls), 1),
        "p95_ms": round(walls[max(int(len(walls) * 0.95) - 1, 0)], 1),
    }


def _download(client: httpx.Client, path: str) -> dict[str, float]:
    start = time.perf_counter()
    r = client.get(path)
    assert r.status_code == 200, (path, r.status_code)
    return {"ms": round((time.perf_counter() - start) * 1000, 1), "bytes": len(r.content)}


def main(records: int) -> dict[str, Any]:
    if OUT.exists():
        shutil.rmtree(OUT)
    rows = [{"id": f"r{i:06d}", "text": f"message {i} " * (1 + i % 5)} for i in range(records)]
    rows[records // 2]["text"] = "a zebra crossed"
    root = team_project(OUT / "team", workflow=workflow(), rows=rows, agac_yml=YML)
    start = time.perf_counter()
    run = api.run("replies", root, progress=False)
    run_s = time.perf_counter() - start
    last = max((records + 49) // 50, 1)
    base = f"/runs/{run.run_id}/answers"
    with running_service(root) as service:
        client = _signed_in(service.url)
        doc: dict[str, Any] = {"records": records, "run_s": round(run_s, 1)}
        for name, query in (
            ("first_page", ""),
            ("last_page", f"?page={last}"),
            ("status_failed", "?status=failed"),
            ("reason", "?reason=provider_error"),
            ("failed_check", "?check=not_neg"),
            ("failed_check_deep", "?check=not_neg&page=40"),
            ("search_record", "?q=zebra"),
            ("search_answer", "?q=neutral&page=20"),
        ):
            doc[name] = _times(client, base + query)
        doc["csv_all"] = _download(client, base + ".csv")
        doc["parquet_all"] = _download(client, base + ".parquet")
        doc["csv_failed_check"] = _download(client, base + ".csv?check=not_neg")
    return doc


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    print(json.dumps(main(parser.parse_args().records)))
