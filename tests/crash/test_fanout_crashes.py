"""A real SIGKILL in the middle of a fan-out, then resume (docs/workflow-reference.md, Fan-out and join; README.md, Contributing): no item is
lost, none is asked twice beyond those in flight at the kill, and the join completes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agac.testing import write_project

WF = """
name: fanned
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 8}
actions:
  - name: extract
    prompt: "Split: {{ source.text }}"
    schema: {type: object, properties: {clauses: {type: array, items: {type: string}, minItems: 10, maxItems: 10}}, required: [clauses]}
  - name: assess
    dependencies: [extract]
    fan_out: {over: extract.clauses, as: clause}
    prompt: "Assess {{ clause }}"
    schema: {type: object, properties: {risk: {enum: [low, high]}}, required: [risk]}
  - {name: collect, kind: join, dependencies: [assess]}
"""
RECORDS, ITEMS = 40, 10
MAX_IN_FLIGHT = 8 + 8  # extract's slots + assess's items in flight
MARKS_WIDTH = 2 * (8 + 2 * 8)  # per action: its slots and the 2 x max_concurrency listed ahead


def _agac(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "AGAC_MOCK_LATENCY_MS": "15", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        check=False,
        cwd=root,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("point", ["after_checkpoint:12", "before_checkpoint:12"])
def test_s1_sigkill_mid_fan_out_resumes_without_asking_items_twice(
    tmp_path: Path, point: str
) -> None:
    write_project(
        tmp_path,
        WF,
        workflow_file="fanned.yml",
        data={
            "data/a.jsonl": [{"id": f"c{i:03d}", "text": f"contract {i}"} for i in range(RECORDS)]
        },
    )
    crashed = _agac(tmp_path, "run", "fanned", "--json", env={"AGAC_CRASH_AT": point})
    assert crashed.returncode == -signal.SIGKILL
    status = json.loads(_agac(tmp_path, "status", "fanned", "--json").stdout)
    assert status["state"] == "running"
    assert 0 < status["actions"]["assess"]["answered"] < RECORDS * ITEMS  # killed mid-fan-out

    resumed = _agac(tmp_path, "run", "fanned", "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["run_id"] == status["run_id"] and summary["state"] == "succeeded"
    assess, collect = summary["actions"]["assess"], summary["actions"]["collect"]
    assert assess["records"] == assess["answered"] == RECORDS * ITEMS and assess["pending"] == 0
    assert collect["records"] == collect["answered"] == RECORDS
    extract = summary["actions"]["extract"]
    # ``calls`` also counts, at their worst case, the units the dispatch marks listed at
    # the kill without an outcome (S1: sent, or about to be); the calls the provider
    # answered are the others.
    unknown = extract["unknown_calls"] + assess["unknown_calls"]
    asked = extract["calls"] + assess["calls"] - unknown
    assert RECORDS * (1 + ITEMS) <= asked <= RECORDS * (1 + ITEMS) + MAX_IN_FLIGHT
    assert unknown <= MARKS_WIDTH

    rows = [
        json.loads(line)
        for line in _agac(tmp_path, "export", "fanned", "--action", "collect").stdout.splitlines()
    ]
    assert len(rows) == RECORDS
    assert all(
        [f["key"] for f in r["output"]["fulfilled"]] == [f"{r['key']}/{i}" for i in range(ITEMS)]
        for r in rows
    )
