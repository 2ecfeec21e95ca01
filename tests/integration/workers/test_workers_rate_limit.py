"""Provider rate limits are global across workers (enforced through the store): three
workers sharing ``rate_limit: {rpm: 600}`` against an emulator that answers 429 above 600
requests a minute get no 429 and reach at least 90 % of 600 RPM over a minute-long window.
This test takes a little over a minute by design (a real minute-long window)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from workers_support import agac, finish, query, start_worker, status

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

pytest.importorskip("openai")

WF = """
name: limited
input: {path: data/, id_field: id}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 256
  max_concurrency: 8
  rate_limit: {rpm: 600}
  retry: {max_attempts: 3, backoff: {initial: 10ms, max: 50ms}}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
"""
RECORDS = 1200


def test_rate_limit_is_global_across_workers_no_429_and_90_percent_of_rpm(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    data = {
        f"data/f{i}.jsonl": [
            {"id": f"f{i}r{j}", "text": f"item {i} {j}"} for j in range(RECORDS // 6)
        ]
        for i in range(6)
    }
    write_project(tmp_path, WF, workflow_file="limited.yml", data=data)
    with RunningEmulator(latency_ms=10) as emu:
        emu.add_fault({"provider": "openai", "op": "chat", "fault": {"rate_limit": {"rpm": 600}}})
        env = {**emu.env(), "AGAC_STORE": fresh_pg_database}
        run_id = json.loads(agac(tmp_path, env, "submit", "limited", "--json").stdout)["run_id"]
        procs = [
            start_worker(tmp_path, env, "--concurrency", "4", "--poll", "0.5", "--exit-when-done")
            for _ in range(3)
        ]
        reports = [finish(p, timeout=180) for p in procs]
        stats = emu.stats()
        rule = emu.state.faults.rules[0]

    assert all(r["shards"] for r in reports)  # every worker took part
    summary = status(tmp_path, env, run_id)
    assert summary["state"] == "succeeded"
    assert summary["actions"]["classify"]["answered"] == RECORDS
    # no 429: the emulator never fired its limit, and no call was asked twice
    assert rule.fired == 0
    assert stats["requests"]["openai"]["chat"] == RECORDS
    errors = query(fresh_pg_database, "SELECT count(*) FROM usage WHERE status <> 'ok'")[0][0]
    assert errors == 0
    # throughput: the busiest minute-long window holds at least 90 % of 600 requests
    times = [
        float(r[0])
        for r in query(fresh_pg_database, "SELECT created_at FROM usage ORDER BY created_at")
    ]
    best = max(sum(1 for t in times if start <= t < start + 60.0) for start in times)
    assert 540 <= best <= 600, best
