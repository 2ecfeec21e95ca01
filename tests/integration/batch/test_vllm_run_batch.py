"""vLLM's offline ``run-batch`` executor through ``agac run``
(``providers: {vllm: {batch: run-batch}}``), against a stand-in command that writes
vLLM's output shape: lines out of order, one request missing, one error line. The missing
record fails ``batch_not_returned`` (B6), the error line fails its record, the rest are
answered, the command runs once, and the ledger is free (local)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from batch_support import counts, rows, run

from agac import api
from agac.testing import write_project

STANDIN = Path(__file__).parents[2] / "fixtures" / "runbatch" / "standin.py"

WORKFLOW = """\
name: bw
input: {path: data/, id_field: id}
defaults:
  model: vllm/Qwen/Qwen2.5-7B-Instruct
  run_mode: batch
  max_tokens: 64
  retry: {max_attempts: 1}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
    schema: {type: object, properties: {label: {type: string, enum: [a, b, c]}},
      required: [label], additionalProperties: false}
"""


def _wait_for_exit(folder: Path) -> None:
    """Until the runner of the one batch under ``folder`` wrote its exit code (a failure
    guard of 60 s: the stand-in takes well under a second)."""
    for _ in range(1200):
        if list(folder.glob("*/exit.json")):
            return
        time.sleep(0.05)
    raise AssertionError(f"run-batch never finished under {folder}")


def test_vllm_run_batch_step_end_to_end(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "invocations.log"
    monkeypatch.setenv("RUNBATCH_STANDIN_LOG", str(log))
    data = [{"id": f"k{i}", "text": f"item {i}"} for i in range(5)]
    agac_yml = (
        "providers:\n  vllm:\n    batch: run-batch\n"
        f"    run_batch_command: {json.dumps(f'{sys.executable} {STANDIN}')}\n"
    )
    write_project(project, WORKFLOW, data={"data/a.jsonl": data}, agac_yml=agac_yml)

    first = run(project)
    if first.exit_code == 75:  # the batch is out: run again to collect it
        _wait_for_exit(project / ".agac" / "run-batch")
        second = run(project)
    else:  # the stand-in finished before the run's first look: it collected it already
        second = first

    assert second.exit_code == 1 and second.summary["state"] == "partial"
    classify = rows(project)
    answered = sorted(k for k, r in classify.items() if r["status"] == "answered")
    failed = {k: r["reason"] for k, r in classify.items() if r["status"] == "failed"}
    # The stand-in leaves out the second line and errors the third (input order).
    assert answered == ["k0", "k3", "k4"]
    assert failed == {"k1": "batch_not_returned", "k2": "provider_error"}
    assert counts(second)["answered"] == 3
    assert len(log.read_text().splitlines()) == 1  # the command ran once

    third = run(project)  # nothing left to send: the command never runs again
    assert third.exit_code == 1
    assert len(log.read_text().splitlines()) == 1
    cost = api.cost("bw", project)
    assert cost["cost_usd"] == 0.0
