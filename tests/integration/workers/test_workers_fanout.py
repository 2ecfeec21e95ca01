"""Fan-out and join (docs/workflow-reference.md, Fan-out and join) in worker mode on a real PostgreSQL: several workers
advance the shards of a fan-out run; every item is asked once and every join completes."""

from __future__ import annotations

from pathlib import Path

from workers_support import agac, finish, start_worker, status

from agac.testing import write_project

WF = """
name: fanned
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 8}
actions:
  - name: extract
    prompt: "Split: {{ source.text }}"
    schema: {type: object, properties: {parts: {type: array, items: {type: string}, minItems: 5, maxItems: 5}}, required: [parts]}
  - name: assess
    dependencies: [extract]
    fan_out: {over: extract.parts, as: part}
    prompt: "Assess {{ part }}"
  - {name: collect, kind: join, dependencies: [assess]}
"""


def test_workers_advance_a_fan_out_run_asking_each_item_once(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    data = {
        f"data/f{i}.jsonl": [{"id": f"f{i}r{j}", "text": f"t {i} {j}"} for j in range(40)]
        for i in range(3)
    }
    write_project(tmp_path, WF, workflow_file="fanned.yml", data=data)
    env = {"AGAC_STORE": fresh_pg_database, "AGAC_MOCK_LATENCY_MS": "2"}
    sub = agac(tmp_path, env, "submit", "fanned", "--json")
    assert sub.returncode == 0, sub.stderr
    procs = [
        start_worker(tmp_path, env, "--concurrency", "4", "--exit-when-done", "--poll", "0.5")
        for _ in range(2)
    ]
    for p in procs:
        finish(p, timeout=300)
    summary = status(tmp_path, env, "fanned")
    assert summary["state"] == "succeeded", summary
    assess, collect = summary["actions"]["assess"], summary["actions"]["collect"]
    assert assess["records"] == assess["answered"] == assess["calls"] == 600
    assert collect["records"] == collect["answered"] == 120
    assert summary["actions"]["extract"]["calls"] == 120
