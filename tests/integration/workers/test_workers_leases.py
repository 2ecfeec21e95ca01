"""Leases in worker mode (S3): a worker paused past its lease has its next write refused
and stops that shard; ``agac run`` and workers hand one run to each other; ``agac
workers`` and ``agac status`` show who holds what."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from workers_support import agac, finish, log_of, query, start_worker, status, terminate, wait_for

from agac.testing import write_project

TOOL = """
import time

def slow(inputs, ctx):
    time.sleep(0.05)
    return {"n": inputs["source"]["n"] * 2}
"""

WF = """
name: leased
input: {path: data/, id_field: id}
defaults: {max_concurrency: 8}
actions:
  - name: double
    kind: tool
    function: tools:slow
"""


def _project(root: Path, records: int) -> None:
    write_project(
        root,
        WF,
        workflow_file="leased.yml",
        files={"tools.py": TOOL},
        data={"data/a.jsonl": [{"id": f"r{j:05d}", "n": j} for j in range(records)]},
    )


def _outcomes(url: str, run_id: str) -> int:
    return int(query(url, "SELECT count(*) FROM outcomes WHERE run_id = %s", run_id)[0][0])


def _holder(url: str, run_id: str) -> tuple[str, int] | None:
    rows = query(
        url,
        "SELECT host, pid FROM leases WHERE name LIKE %s AND expires_at > extract(epoch from now())",
        f"shard:{run_id}:%",
    )
    return (rows[0][0], int(rows[0][1])) if rows else None


def _frozen_mid_pipeline(url: str) -> bool:
    """Whether a session of the (stopped) worker is ``active`` in the server: caught in the
    middle of a pipelined ``executemany`` (psycopg pipelines it), it holds its transaction's
    row locks — the lease fence's among them — without the server's idle-in-transaction
    timeout ever ending it, so no other worker can take the lease until it resumes. A
    session idle in its transaction is ended by that timeout (store/database.py)."""
    rows = query(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid() AND state = 'active'",
    )
    return bool(rows[0][0])


_SESSIONS = """
SELECT pid, client_port, state, wait_event_type, wait_event, now() - xact_start,
       pg_blocking_pids(pid), left(query, 80)
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
"""


def _pause(proc: subprocess.Popen[str], url: str) -> None:
    """SIGSTOP ``proc`` (a GC stall, a VM freeze) at a moment it is not in the middle of
    a pipeline (see :func:`_frozen_mid_pipeline`): on a loaded machine a pause lands there
    often enough to hold the takeover until the end of the test."""
    for _ in range(50):
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(0.2)  # a statement the server was running when the pause came ends
        if not _frozen_mid_pipeline(url):
            return
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.1)
    raise AssertionError("the worker was caught in a pipeline at each of 50 pauses")


def test_s3_worker_paused_past_its_lease_has_its_next_write_refused(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    _project(tmp_path, records=600)
    env = {"AGAC_STORE": fresh_pg_database}
    run_id = json.loads(agac(tmp_path, env, "submit", "leased", "--json").stdout)["run_id"]
    # A lease of 5 s: renewed every 1.7 s, it does not lapse while the worker runs on a
    # loaded machine, only in the pause.
    paused = start_worker(
        tmp_path, env, "--concurrency", "4", "--lease-ttl", "5", "--poll", "0.5", "--exit-when-done"
    )
    wait_for(lambda: _outcomes(fresh_pg_database, run_id) >= 40, 120, "the first worker's progress")
    _pause(paused, fresh_pg_database)  # a pause longer than the lease
    try:
        time.sleep(5.5)
        taker = start_worker(
            tmp_path,
            env,
            "--concurrency",
            "4",
            "--lease-ttl",
            "30",
            "--poll",
            "0.5",
            "--exit-when-done",
        )
        try:
            wait_for(
                lambda: (
                    _holder(fresh_pg_database, run_id) == (os.uname().nodename, taker.pid)
                    or _outcomes(fresh_pg_database, run_id) >= 600
                ),
                120,
                "the takeover",
            )
        except AssertionError:  # what held it, shown when the test fails
            print(paused.pid, taker.pid, query(fresh_pg_database, _SESSIONS))
            print(query(fresh_pg_database, "SELECT * FROM leases"))
            print(log_of(taker)[-2000:])
            raise
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    first = finish(paused, timeout=120)
    second = finish(taker, timeout=120)
    assert first["lease_lost"] == [f"{run_id}:o:0000000000"], log_of(paused)
    assert "its write was refused" in log_of(paused)
    assert second["lease_lost"] == []
    lost = query(
        fresh_pg_database,
        "SELECT data FROM events WHERE run_id = %s AND kind = 'shard_lease_lost'",
        run_id,
    )
    assert len(lost) == 1 and json.loads(lost[0][0])["worker"] == first["worker_id"]
    summary = status(tmp_path, env, run_id)
    assert summary["state"] == "succeeded"
    a = summary["actions"]["double"]
    assert a["answered"] == 600
    # the paused worker's late results were refused, not ledgered next to the new owner's
    assert a["tool_calls"] == 600


def test_s3_agac_run_and_workers_hand_a_run_to_each_other(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    _project(tmp_path, records=1500)
    env = {"AGAC_STORE": fresh_pg_database}
    assert agac(tmp_path, env, "store", "upgrade").returncode == 0
    # agac run starts it here and is interrupted (Ctrl-C settles what is in flight) ...
    proc = subprocess.Popen(
        [sys.executable, "-m", "agac.cli.main", "run", "leased"],
        cwd=tmp_path,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(
        lambda: bool(query(fresh_pg_database, "SELECT count(*) FROM outcomes")[0][0] >= 30),
        60,
        "agac run's progress",
    )
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=240)
    assert proc.returncode == 130
    run_id = query(fresh_pg_database, "SELECT id FROM runs")[0][0]

    # ... a worker takes it over; while it holds a shard, agac run is refused naming it ...
    w = start_worker(tmp_path, env, "--concurrency", "2", "--lease-ttl", "30", "--poll", "0.5")
    wait_for(lambda: _holder(fresh_pg_database, run_id) is not None, 240, "the worker's claim")
    listed = json.loads(agac(tmp_path, env, "workers", "--json").stdout)
    assert [x["pid"] for x in listed] == [w.pid]
    assert listed[0]["holds"] and listed[0]["holds"][0]["run_id"] == run_id
    shown = status(tmp_path, env, run_id)
    assert {s["owner"] for s in shown["shards"] if s["owner"]} == {listed[0]["worker_id"]}
    refused = agac(tmp_path, env, "run", "leased", "--json")
    assert refused.returncode == 75
    assert f"worker {listed[0]['worker_id']}" in refused.stderr

    # ... SIGTERM: the worker settles its calls in flight, hands its shards back, exits 0 ...
    report = terminate(w)
    assert report["stopped_by_signal"] is True
    assert _holder(fresh_pg_database, run_id) is None
    assert json.loads(agac(tmp_path, env, "workers", "--json").stdout) == []

    # ... and agac run finishes it: nothing was lost or paid twice.
    done = agac(tmp_path, env, "run", "leased", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["run_id"] == run_id and summary["state"] == "succeeded"
    assert summary["actions"]["double"]["answered"] == 1500
    assert summary["actions"]["double"]["tool_calls"] == 1500


def test_agac_cancel_of_a_run_workers_are_advancing(tmp_path: Path, fresh_pg_database: str) -> None:
    _project(tmp_path, records=3000)
    env = {"AGAC_STORE": fresh_pg_database}
    run_id = json.loads(agac(tmp_path, env, "submit", "leased", "--json").stdout)["run_id"]
    w = start_worker(
        tmp_path, env, "--concurrency", "4", "--lease-ttl", "3", "--poll", "0.5", "--exit-when-done"
    )
    wait_for(lambda: _outcomes(fresh_pg_database, run_id) >= 20, 240, "the worker's progress")
    # the worker sees `cancelling` at its next heartbeat, settles what is in flight, hands
    # its shards back and ends the run under the run lease
    done = agac(tmp_path, env, "cancel", run_id, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["state"] == "cancelled"
    a = summary["actions"]["double"]
    assert a["answered"] + a["skipped"] == 3000 and a["pending"] == 0
    assert a["answered"] == a["tool_calls"]  # every call made was settled, none lost
    assert a["reasons"].get("cancelled", 0) == a["skipped"]
    finish(w, timeout=240)
