"""Real process crashes (SIGKILL at a chosen point) and Ctrl-C, then recovery.

The rule (README.md, Contributing): the next run loses nothing and pays again only for the calls
that were in flight at the kill: at most the sum of max_concurrency of the actions.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agac.testing import write_project

WF = """
name: crashy
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 8}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
    schema: {type: object, properties: {label: {enum: [a, b, c]}}, required: [label]}
  - name: summarize
    dependencies: [classify]
    prompt: "Summarize {{ source.text }} labelled {{ classify.label }}"
"""
MAX_IN_FLIGHT = 8 + 8


def _project(root: Path, n: int = 300) -> None:
    write_project(
        root,
        WF,
        workflow_file="crashy.yml",
        data={"data/a.jsonl": [{"id": f"r{i:04d}", "text": f"t {i}"} for i in range(n)]},
    )


def _agac(
    root: Path, *args: str, env: dict[str, str] | None = None, **kw
) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "AGAC_MOCK_LATENCY_MS": "15", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        check=False,
        cwd=root,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,  # only a hang reaches it
        **kw,
    )


@pytest.mark.parametrize("point", ["after_checkpoint:5", "before_checkpoint:5"])
def test_s1_sigkill_mid_run_loses_nothing_and_repays_only_in_flight(
    tmp_path: Path, point: str
) -> None:
    _project(tmp_path)
    crashed = _agac(tmp_path, "run", "crashy", "--json", env={"AGAC_CRASH_AT": point})
    assert crashed.returncode == -signal.SIGKILL
    status = json.loads(_agac(tmp_path, "status", "crashy", "--json").stdout)
    assert status["state"] == "running"  # not final: the next run continues it
    done_before = sum(a["answered"] for a in status["actions"].values())
    calls_before = sum(a["calls"] for a in status["actions"].values())
    assert 0 < done_before < 600

    resumed = _agac(tmp_path, "run", "crashy", "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["run_id"] == status["run_id"]
    assert summary["state"] == "succeeded"
    for a in summary["actions"].values():
        assert a["answered"] == 300 and a["pending"] == 0
    calls = sum(a["calls"] for a in summary["actions"].values())
    unknown = sum(a["unknown_calls"] for a in summary["actions"].values())
    # Calls paid before the kill stay in the ledger (S2: usage is never forgotten) and
    # only those in flight at the kill are asked again; those are also counted once more,
    # as calls whose outcome is unknown (S1: at most the marks' width, 3 x 8 per action).
    assert calls - unknown - 600 <= MAX_IN_FLIGHT
    assert calls - unknown >= 600
    assert unknown <= 2 * 3 * 8
    assert calls_before <= calls


def test_ctrl_c_settles_in_flight_checkpoints_and_exits_130(tmp_path: Path) -> None:
    _project(tmp_path, n=400)
    # Calls of a second each: the run (about 100 s) is still going when the polls below,
    # however slow on a loaded machine, have seen it answer.
    env = {**os.environ, "AGAC_MOCK_LATENCY_MS": "1000"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agac.cli.main", "run", "crashy"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240  # only a hang reaches it
    while True:  # wait until the run is really calling
        time.sleep(0.3)
        st = _agac(tmp_path, "status", "crashy", "--json")
        if st.returncode == 0 and json.loads(st.stdout)["actions"]["classify"]["answered"] > 20:
            break
        assert proc.poll() is None and time.monotonic() < deadline, "the run never got going"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=240)
    assert proc.returncode == 130, err
    assert "stopping" in err
    status = json.loads(_agac(tmp_path, "status", "crashy", "--json").stdout)
    assert status["state"] == "running"
    calls_before = sum(a["calls"] for a in status["actions"].values())
    answered_before = sum(a["answered"] for a in status["actions"].values())
    # every paid call settled before exiting: nothing in flight was lost
    assert calls_before == answered_before

    resumed = _agac(tmp_path, "run", "crashy", "--json")
    summary = json.loads(resumed.stdout)
    assert summary["state"] == "succeeded"
    assert sum(a["calls"] for a in summary["actions"].values()) == 800


def test_s3_crashed_owner_is_taken_over_at_once(tmp_path: Path) -> None:
    _project(tmp_path, n=200)
    crashed = _agac(tmp_path, "run", "crashy", env={"AGAC_CRASH_AT": "after_checkpoint:2"})
    assert crashed.returncode == -signal.SIGKILL
    # The dead pid's lease is made good for another hour, so that only the takeover (not
    # its expiry, however slow the machine) lets the next run in; without --wait a live
    # owner is refused at once.
    db = sqlite3.connect(tmp_path / ".agac" / "agac.db")
    try:
        with db:
            held = db.execute(
                "UPDATE leases SET expires_at = expires_at + 3600 WHERE name LIKE 'run:%'"
            ).rowcount
    finally:
        db.close()
    assert held == 1
    resumed = _agac(tmp_path, "run", "crashy", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["state"] == "succeeded"
