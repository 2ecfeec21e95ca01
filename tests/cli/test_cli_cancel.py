"""``agac cancel`` through the CLI: a run owned by a live process is stopped by its owner
at the next heartbeat and ends ``cancelled``; a final run cannot be cancelled."""

from __future__ import annotations

import time
from pathlib import Path

from cli_support import agac, finish, spawn

from agac.testing import write_project

LONG = """\
name: slow
input: {path: data/a.jsonl, id_field: id}
defaults: {model: mock/m, max_concurrency: 2}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
"""


def _wait_until_running(root: Path, deadline: float) -> str:
    while time.monotonic() < deadline:
        rows = agac("runs", "list", "--json", cwd=root).json() if (root / ".agac").exists() else []
        if rows and rows[0]["state"] == "running":
            return str(rows[0]["run_id"])
        time.sleep(0.1)
    raise AssertionError("the run did not start")


def test_cancel_a_run_owned_by_a_live_process(tmp_path: Path) -> None:
    write_project(
        tmp_path, LONG, data={"data/a.jsonl": [{"id": i, "text": f"w{i}"} for i in range(400)]}
    )
    proc = spawn("run", "slow", "--json", cwd=tmp_path, env={"AGAC_MOCK_LATENCY_MS": "100"})
    try:
        run_id = _wait_until_running(tmp_path, time.monotonic() + 20)
        cancelled = agac("cancel", "slow", "--json", cwd=tmp_path, timeout=90)
        _out, err = proc.communicate(timeout=240)
    finally:
        finish(proc)
    assert cancelled.code == 0, cancelled
    doc = cancelled.json()
    assert doc["run_id"] == run_id and doc["state"] == "cancelled"
    # why it ended has the shape every error has (docs/cli.md, Errors)
    assert set(doc["error"]) == {"code", "message", "hint"} and doc["error"]["code"] == "cancelled"
    ask = doc["actions"]["ask"]
    assert ask["answered"] > 0 and ask["reasons"] == {"cancelled": 400 - ask["answered"]}
    assert ask["pending"] == 0 and ask["calls"] == ask["answered"]
    assert proc.returncode == 1, err
    again = agac("cancel", run_id, cwd=tmp_path)
    assert again.code == 2 and "already ended cancelled" in again.err
