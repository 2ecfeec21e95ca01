"""Provider rate limits are global across workers (enforced through the store): three
workers sharing ``rate_limit: {rpm: N}`` against an emulator that answers 429 above N
requests a "minute" get no 429 and reach at least 90 % of N over a minute-long window.

The minute is shortened to 21 s on both sides (``AGAC_RATE_WINDOW_SECONDS`` for the
workers, the emulator's own window in this process) and N to 210, so the workers are
held to the same 10 requests a second as 600 a real minute, and the test waits one
short window instead of a real minute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from workers_support import agac, finish, query, start_worker, status

from agac.emulator import faults
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
  rate_limit: {rpm: RPM}
  retry: {max_attempts: 3, backoff: {initial: 10ms, max: 50ms}}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
"""
WINDOW = 21.0
"""Seconds of the shortened "minute", the workers' and the emulator's."""
RPM = 210
"""Requests a window allows: 10 a second, as 600 a real minute."""
RECORDS = 2 * RPM  # six files of 70


def test_rate_limit_is_global_across_workers_no_429_and_90_percent_of_rpm(
    tmp_path: Path, fresh_pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(faults, "RATE_WINDOW_SECONDS", WINDOW)
    data = {
        f"data/f{i}.jsonl": [
            {"id": f"f{i}r{j}", "text": f"item {i} {j}"} for j in range(RECORDS // 6)
        ]
        for i in range(6)
    }
    write_project(tmp_path, WF.replace("RPM", str(RPM)), workflow_file="limited.yml", data=data)
    with RunningEmulator(latency_ms=10) as emu:
        emu.add_fault({"provider": "openai", "op": "chat", "fault": {"rate_limit": {"rpm": RPM}}})
        env = {
            **emu.env(),
            "AGAC_STORE": fresh_pg_database,
            "AGAC_RATE_WINDOW_SECONDS": str(WINDOW),
        }
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
    # throughput: the busiest window holds at least 90 % of the requests it allows
    times = [
        float(r[0])
        for r in query(fresh_pg_database, "SELECT created_at FROM usage ORDER BY created_at")
    ]
    best = max(sum(1 for t in times if start <= t < start + WINDOW) for start in times)
    assert 0.9 * RPM <= best <= RPM, best
