"""SIGTERM always works for ``agac worker`` (issue 12 item 4), with real processes, real
signals, PostgreSQL and the emulator: the first stops claiming and waiting within about a
second (the calls in flight settle, the shards are handed back, exit 0); the second
stops at once (exit 130). No asyncio warning or traceback either way."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from workers_support import agac, log_of, query, start_worker, wait_for

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """
name: fleet
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, max_concurrency: 8}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
"""
CRASH_SAID = (
    "Traceback",
    "Task was destroyed",
    "was never retrieved",
    "Exception ignored",
    "RuntimeWarning",
)


def _project(root: Path, records: int) -> None:
    write_project(
        root,
        WF,
        workflow_file="fleet.yml",
        data={"data/a.jsonl": [{"id": f"r{j:04d}", "text": f"t{j}"} for j in range(records)]},
    )


def _chat(emu: RunningEmulator) -> int:
    return int(emu.stats()["requests"].get("openai", {}).get("chat", 0))


def _signal(proc: object, times: int, gap: float = 0.5, timeout: float = 60) -> tuple[float, str]:
    for i in range(times):
        if i:
            time.sleep(gap)
        proc.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
    sent = time.monotonic()
    out, _ = proc.communicate(timeout=timeout)  # type: ignore[attr-defined]
    return time.monotonic() - sent, out


def test_idle_worker_stops_within_a_second_of_sigterm(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    """An idle worker waits for a NOTIFY up to --poll seconds; SIGTERM is not made to wait
    for that."""
    _project(tmp_path, records=1)
    env = {"AGAC_STORE": fresh_pg_database}
    assert agac(tmp_path, env, "store", "upgrade").returncode == 0
    worker = start_worker(tmp_path, env, "--poll", "120")
    wait_for(lambda: "started" in log_of(worker), 240, "the worker's start")
    time.sleep(0.5)

    took, out = _signal(worker, 1)

    assert worker.returncode == 0, log_of(worker)
    assert json.loads(out)["stopped_by_signal"] is True
    assert took < 30, took  # not the 120 s poll (the margin: a loaded machine's process exit)


def test_worker_first_sigterm_settles_calls_in_flight(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    _project(tmp_path, records=300)
    with RunningEmulator(latency_ms=1500) as emu:
        env = {"AGAC_STORE": fresh_pg_database, **emu.env()}
        run_id = json.loads(agac(tmp_path, env, "submit", "fleet", "--json").stdout)["run_id"]
        worker = start_worker(tmp_path, env, "--concurrency", "8", "--poll", "0.5")
        wait_for(lambda: _chat(emu) >= 16, 240, "two waves of calls")

        took, out = _signal(worker, 1)

        assert worker.returncode == 0, log_of(worker)
        report = json.loads(out)
        assert report["stopped_by_signal"] is True and report["stopped_at_once"] is False
        for said in CRASH_SAID:
            assert said not in log_of(worker), log_of(worker)
        assert took < 30, took
        sent = _chat(emu)
        ledger = query(
            fresh_pg_database,
            "SELECT count(*) FROM usage WHERE run_id = %s AND kind = 'llm'",
            run_id,
        )[0][0]
        assert ledger == sent  # every call sent settled before the exit
        assert (
            query(
                fresh_pg_database,
                "SELECT count(*) FROM leases WHERE name LIKE %s "
                "AND expires_at > extract(epoch from now())",
                f"shard:{run_id}:%",
            )[0][0]
            == 0
        )


def test_worker_second_sigterm_stops_at_once(tmp_path: Path, fresh_pg_database: str) -> None:
    _project(tmp_path, records=40)
    with RunningEmulator(latency_ms=120_000) as emu:
        env = {"AGAC_STORE": fresh_pg_database, **emu.env()}
        agac(tmp_path, env, "submit", "fleet", "--json")
        worker = start_worker(tmp_path, env, "--concurrency", "4", "--poll", "0.5")
        wait_for(lambda: _chat(emu) >= 4, 240, "the calls in flight")

        took, out = _signal(worker, 2)

        assert worker.returncode == 130, log_of(worker)
        assert json.loads(out)["stopped_at_once"] is True
        for said in CRASH_SAID:
            assert said not in log_of(worker), log_of(worker)
        assert took < 30, took  # not the 120 s the calls in flight take
