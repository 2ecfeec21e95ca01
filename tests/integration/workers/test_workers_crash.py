"""Three worker processes over one run of 20 input files against the emulator, through
the official OpenAI SDK: an online action and a batch action. One worker is killed with
SIGKILL mid-run — while it holds a batch the provider has just accepted, or right after a
checkpoint of online work. The others take its shards over when its leases expire (S3),
adopt the batch instead of sending it again (B0/B2), and finish the run."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from workers_support import agac, finish, log_of, query, start_worker, status

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

pytest.importorskip("openai")

WF = """
name: fleet
input: {path: data/, id_field: id}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 64
  max_concurrency: 8
  poll_interval: 1s
  retry: {max_attempts: 3, backoff: {initial: 10ms, max: 50ms}}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
  - name: summarize
    run_mode: batch
    dependencies: [classify]
    prompt: "Summarize {{ source.text }} given {{ classify.text }}"
"""
FILES, PER_FILE = 20, 40
CONCURRENCY = 4


@pytest.mark.parametrize("point", ["after_submit:2", "after_checkpoint:15"])
def test_s3_sigkilled_worker_is_taken_over_nothing_sent_twice(
    tmp_path: Path, fresh_pg_database: str, point: str
) -> None:
    data = {
        f"data/f{i:02d}.jsonl": [
            {"id": f"f{i}r{j}", "text": f"review {i}-{j}"} for j in range(PER_FILE)
        ]
        for i in range(FILES)
    }
    write_project(tmp_path, WF, workflow_file="fleet.yml", data=data)
    with RunningEmulator(latency_ms=20, batch_seconds=2) as emu:
        env = {**emu.env(), "AGAC_STORE": fresh_pg_database}
        sub = agac(tmp_path, env, "submit", "fleet", "--json")
        assert sub.returncode == 0, sub.stderr
        run_id = json.loads(sub.stdout)["run_id"]
        args = (
            "--concurrency",
            str(CONCURRENCY),
            "--lease-ttl",
            "3",
            "--poll",
            "0.5",
            "--exit-when-done",
        )
        doomed = start_worker(tmp_path, {**env, "AGAC_CRASH_AT": point}, *args)
        others = [start_worker(tmp_path, env, *args) for _ in range(2)]
        doomed.communicate(timeout=120)
        assert doomed.returncode == -signal.SIGKILL, log_of(doomed)[-2000:]
        reports = [finish(p, timeout=240) for p in others]

        summary = status(tmp_path, env, run_id)
        assert summary["state"] == "succeeded", summary
        records = FILES * PER_FILE
        for name in ("classify", "summarize"):
            a = summary["actions"][name]
            assert (a["answered"], a["failed"], a["pending"]) == (records, 0, 0), (name, a)
        stats = emu.stats()
        # one batch per input file (B1), none sent twice — the killed worker's is adopted
        assert stats["requests"]["openai"].get("batch.create", 0) == FILES
        assert len(stats["batches"]) == FILES
        assert sum(b["requests"] for b in stats["batches"]) == records
        # only the calls the killed worker had in flight were asked again (README.md, Contributing)
        assert stats["duplicate_answers"] <= CONCURRENCY
        # the survivors took the dead worker's shards over
        taken = query(
            fresh_pg_database,
            "SELECT count(*) FROM shards WHERE run_id = %s AND claims > 1",
            run_id,
        )[0][0]
        assert taken >= 1
        if point.startswith("after_submit"):
            adopted = query(
                fresh_pg_database,
                "SELECT count(*) FROM events WHERE run_id = %s AND kind = 'batch_adopted'",
                run_id,
            )
            # At least once. Under heavy load a survivor's 3 s lease can lapse while it
            # adopts, and the next holder adopts the same provider batch again (one more
            # event, no new batch: batch.create is counted above). See "Scale-out workers".
            assert adopted[0][0] >= 1
        # batches are owned like shards: polling was spread over the surviving workers
        pollers = query(
            fresh_pg_database,
            "SELECT DISTINCT data::json->>'worker' FROM events WHERE run_id = %s "
            "AND kind = 'shard_claimed' AND data::json->>'shard' LIKE 'b:%%'",
            run_id,
        )
        assert len({r[0] for r in pollers} & {r["worker_id"] for r in reports}) == 2
        assert sum(len(r["finalized"]) for r in reports) == 1
        ended = query(
            fresh_pg_database,
            "SELECT count(*) FROM events WHERE run_id = %s AND kind = 'run_ended'",
            run_id,
        )
        assert ended[0][0] == 1  # exactly one final state, written once


ONLINE = """
name: lost
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, max_tokens: 64, max_concurrency: 8}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
"""


def test_s1_dispatch_mark_counts_calls_a_sigkilled_worker_lost(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    """Worker mode: the worker that claims a killed worker's shard counts the calls that
    were in flight there (S1, §8): emulator ≤ ledger ≤ emulator + the marks' width."""
    import time

    write_project(
        tmp_path,
        ONLINE,
        workflow_file="lost.yml",
        data={"data/a.jsonl": [{"id": f"r{j:04d}", "text": f"t{j}"} for j in range(400)]},
    )
    with RunningEmulator(latency_ms=200) as emu:
        env = {**emu.env(), "AGAC_STORE": fresh_pg_database}
        run_id = json.loads(agac(tmp_path, env, "submit", "lost", "--json").stdout)["run_id"]
        args = ("--concurrency", "8", "--lease-ttl", "3", "--poll", "0.5", "--exit-when-done")
        doomed = start_worker(tmp_path, env, *args)
        deadline = time.monotonic() + 120
        while emu.stats()["requests"].get("openai", {}).get("chat", 0) < 60:
            assert time.monotonic() < deadline and doomed.poll() is None, log_of(doomed)[-2000:]
            time.sleep(0.01)
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=240)
        finish(start_worker(tmp_path, env, *args), timeout=240)

        assert status(tmp_path, env, run_id)["state"] == "succeeded"
        sent = emu.stats()["requests"]["openai"]["chat"]
        cost = json.loads(agac(tmp_path, env, "cost", run_id, "--json").stdout)
        ledger = sum(r["calls"] for r in cost["rows"])
        unknown = [r for r in cost["rows"] if r["origin"] == "unknown"]
        assert sent <= ledger <= sent + 2 * 3 * 8, (sent, cost)  # two shards held, 3 x 8 each
        assert unknown and all(r["priced_by_a_later_answer"] == r["calls"] for r in unknown)
