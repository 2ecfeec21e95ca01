"""``agac submit``, ``agac worker`` and ``agac workers`` on a real PostgreSQL: admission
without execution, shard claims by several worker processes, the SQLite refusal."""

from __future__ import annotations

import json
from pathlib import Path

from workers_support import agac, finish, query, start_worker, status

from agac.testing import write_project

TOOL = """
import time

def slow(inputs, ctx):
    time.sleep(0.02)
    return {"n": inputs["source"]["n"] * 2}
"""

WF = """
name: scale
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 8}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
  - name: double
    kind: tool
    function: tools:slow
    dependencies: [classify]
"""


def _project(root: Path, files: int = 4, per_file: int = 60) -> None:
    data = {
        f"data/f{i:02d}.jsonl": [
            {"id": f"f{i}r{j}", "text": f"t {i} {j}", "n": j} for j in range(per_file)
        ]
        for i in range(files)
    }
    write_project(root, WF, workflow_file="scale.yml", data=data, files={"tools.py": TOOL})


def test_worker_refuses_a_sqlite_store(tmp_path: Path) -> None:
    _project(tmp_path, files=1, per_file=3)
    done = agac(tmp_path, {}, "worker", "--json")
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "usage_error" and "PostgreSQL" in error["message"]
    assert "AGAC_STORE=postgresql://" in done.stderr
    submitted = agac(tmp_path, {}, "submit", "scale")
    assert submitted.returncode == 2 and "PostgreSQL" in submitted.stderr


def test_submit_admits_without_executing_and_workers_finish_it(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    _project(tmp_path, files=4, per_file=1100)
    env = {"AGAC_STORE": fresh_pg_database, "AGAC_MOCK_LATENCY_MS": "5"}
    sub = agac(tmp_path, env, "submit", "scale", "--json")
    assert sub.returncode == 0, sub.stderr
    doc = json.loads(sub.stdout)
    assert doc["state"] == "queued" and doc["records"] == 4400
    assert doc["shards"] == 8  # two ranges of <=1,000 records per file
    assert status(tmp_path, env, doc["run_id"])["actions"]["classify"]["answered"] == 0
    # R1: submitting again continues the open run instead of admitting another
    again = json.loads(agac(tmp_path, env, "submit", "scale", "--json").stdout)
    assert again["run_id"] == doc["run_id"] and again["shards"] == 8

    procs = [
        start_worker(tmp_path, env, "--concurrency", "4", "--exit-when-done", "--poll", "0.5")
        for _ in range(3)
    ]
    reports = [finish(p, timeout=300) for p in procs]
    summary = status(tmp_path, env, doc["run_id"])
    assert summary["state"] == "succeeded"
    for name in ("classify", "double"):
        assert summary["actions"][name]["answered"] == 4400
    assert summary["actions"]["classify"]["calls"] == 4400  # every record answered once
    assert summary["actions"]["double"]["tool_calls"] == 4400
    # several workers advanced shards of the same run
    owners = {s["last_owner"] for s in summary["shards"] if s["kind"] == "online"}
    assert len(owners) >= 2, owners
    assert sum(r["shards"] for r in reports) >= 8
    assert sum(len(r["finalized"]) for r in reports) == 1  # exactly one worker ended it
    ended = query(
        fresh_pg_database,
        "SELECT count(*) FROM events WHERE run_id = %s AND kind = 'run_ended'",
        doc["run_id"],
    )
    assert ended[0][0] == 1
