"""The newcomer's path: batch mode asks identical requests once, also across a crash. A
run whose batches hold identical requests (within a file, and across two files) is killed
between submission and collection; after it resumes, every record sharing a request has
the one answer, no batch was submitted twice, the provider answered each distinct request
once and the ledger bills one call for each."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from crash_support import agac

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """
name: bdup
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, run_mode: batch, retry: {max_attempts: 2}}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
    schema: {type: object, properties: {label: {enum: [a, b, c]}}, required: [label]}
"""
FILES = {"f0": ["alpha", "beta", "alpha"], "f1": ["alpha", "gamma"]}
"""Five records, three distinct requests: f1's alpha joins f0's batch; gamma is f1's own."""


def _write(root: Path) -> dict[str, str]:
    data = {
        f"data/{stem}.jsonl": [{"id": f"{stem}r{j}", "text": t} for j, t in enumerate(texts)]
        for stem, texts in FILES.items()
    }
    write_project(root, WF, workflow_file="bdup.yml", data=data)
    return {r["id"]: r["text"] for rows in data.values() for r in rows}


@pytest.mark.parametrize("point", ["after_submit:1", "before_submit:2", "before_collected:1"])
def test_i43_7_a_crash_between_submission_and_collection_pays_each_request_once(
    tmp_path: Path, point: str
) -> None:
    texts = _write(tmp_path)
    with RunningEmulator(batch_seconds=60) as emu:
        emu.hold_clock()  # batches progress only when advanced
        env = emu.env()
        if point.startswith("before_collected"):
            assert agac(tmp_path, env, "run", "bdup").returncode == 75
            emu.advance(120)
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": point}, "run", "bdup")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        if not point.startswith("before_collected"):
            resumed = agac(tmp_path, env, "run", "bdup")
            assert resumed.returncode == 75, resumed.stderr
            emu.advance(120)
        done = agac(tmp_path, env, "run", "bdup", "--json")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)["actions"]["classify"]
        assert (summary["answered"], summary["calls"], summary["reused"]) == (5, 3, 2)
        stats = emu.stats()

    got = {r["key"]: r for r in api.export_rows("bdup", "classify", tmp_path)}
    assert {r["status"] for r in got.values()} == {"answered"}
    labels: dict[str, set[str]] = {}
    for key, text in texts.items():
        labels.setdefault(text, set()).add(got[key]["output"]["label"])
    assert all(len(v) == 1 for v in labels.values()), labels  # one answer per request
    assert stats["requests"]["openai"]["batch.create"] == 2  # one per file, never twice
    assert sorted(b["requests"] for b in stats["batches"]) == [1, 2]
    assert (stats["answered"], stats["duplicate_answers"]) == (3, 0)
    cost = json.loads(agac(tmp_path, {}, "cost", "bdup", "--json").stdout)
    assert sum(r["calls"] for r in cost["rows"]) == 3  # the ledger: one call per request
