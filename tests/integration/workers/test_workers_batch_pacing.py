"""B12 across workers: ``batch_submissions_per_minute`` is one window in the store, shared
by every worker. The minute is shortened for this test (``AGAC_RATE_WINDOW_SECONDS``, the
same knob the emulator's own rate window has) so it runs in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from workers_support import agac, log_of, query, start_worker, terminate, wait_for

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

pytest.importorskip("openai")

WF = """
name: paced
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, run_mode: batch, max_tokens: 64, poll_interval: 1s}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
"""
WINDOW = 4.0


def test_b12_batch_submissions_per_minute_hold_across_workers(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    data = {
        f"data/f{i}.jsonl": [{"id": f"f{i}r{j}", "text": f"t {i} {j}"} for j in range(3)]
        for i in range(6)
    }
    write_project(
        tmp_path,
        WF,
        workflow_file="paced.yml",
        data=data,
        agac_yml="providers:\n  openai: {batch_submissions_per_minute: 2}\n",
    )
    with RunningEmulator(batch_seconds=3600) as emu:
        env = {
            **emu.env(),
            "AGAC_STORE": fresh_pg_database,
            "AGAC_RATE_WINDOW_SECONDS": str(WINDOW),
        }
        run_id = json.loads(agac(tmp_path, env, "submit", "paced", "--json").stdout)["run_id"]
        workers = [start_worker(tmp_path, env, "--poll", "0.3") for _ in range(3)]
        try:
            wait_for(
                lambda: (
                    query(
                        fresh_pg_database,
                        "SELECT count(*) FROM batches WHERE submitted_at IS NOT NULL",
                    )[0][0]
                    == 6
                ),
                90,
                "six submissions",
            )
        except AssertionError:
            print(
                query(fresh_pg_database, "SELECT shard, state, ready_at, owner, claims FROM shards")
            )
            print(query(fresh_pg_database, "SELECT key, file, state, submitted_at FROM batches"))
            print(
                query(fresh_pg_database, "SELECT kind, data FROM events ORDER BY id DESC LIMIT 15")
            )
            raise
        finally:
            reports = [terminate(w) for w in workers]
            for w in workers:
                print(log_of(w)[-1500:])  # shown when the test fails
        stats = emu.stats()
    assert stats["requests"]["openai"]["batch.create"] == 6  # one per file, none twice
    times = sorted(
        float(r[0])
        for r in query(
            fresh_pg_database, "SELECT submitted_at FROM batches WHERE run_id = %s", run_id
        )
    )
    # never more than 2 submissions within one window, whichever worker sent them
    for i in range(len(times) - 2):
        assert times[i + 2] - times[i] >= WINDOW, times
    assert sum(r["shards"] for r in reports) >= 6
