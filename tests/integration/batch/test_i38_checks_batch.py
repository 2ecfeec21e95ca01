"""Checks on batch answers (The quality loop: checks): the verdicts are settled when the
batch is read, like a live answer's; a ``repair`` check an answer from a batch fails makes
the unit fail ``check_failed`` (repairs are asked live only), and nothing is asked twice."""

from __future__ import annotations

import json
from pathlib import Path

from batch_support import counts, creates, rows, run

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

BAD = json.dumps({"label": "bad", "total": -5})
WORKFLOW = """name: bw
input: {path: data/, id_field: id}
defaults:
  model: openai/gpt-4o-mini
  run_mode: batch
  max_tokens: 64
actions:
  - name: classify
    prompt: "Read this invoice: {{ source.text }}"
    schema:
      type: object
      properties: {label: {type: string}, total: {type: number}}
      required: [label, total]
      additionalProperties: false
    checks:
      - {name: total_positive, expr: "answer.total >= 0", message: no negative total,
         on_fail: repair}
      - {name: labelled, expr: "answer.label != 'bad'", on_fail: flag}
"""


def test_i38_checks_judge_batch_answers_when_the_batch_is_read(
    emulator: RunningEmulator, project: Path
) -> None:
    data = [
        {
            "id": f"r{i}",
            "text": f"invoice {i}" + (f" [[emulator answers: {BAD}]]" if i == 1 else ""),
        }
        for i in range(3)
    ]
    write_project(project, WORKFLOW, data={"data/a.jsonl": data})

    assert run(project).exit_code == 75
    emulator.advance(120)
    second = run(project)

    classify = counts(second)
    assert (classify["answered"], classify["reasons"]) == (2, {"check_failed": 1})
    assert classify["calls"] == 3 and creates(emulator.stats(), "openai") == 1
    assert emulator.stats()["requests"]["openai"].get("chat", 0) == 0  # no live repair
    got = rows(project)
    assert (got["r1"]["status"], got["r1"]["reason"]) == ("failed", "check_failed")
    assert "not repaired" in got["r1"]["detail"] and got["r1"]["output"]["total"] == -5
    assert got["r1"]["checks"] == {"total_positive": False, "labelled": False}
    assert got["r0"]["checks"] == {"total_positive": True, "labelled": True}
    assert second.summary["checks"]["classify"]["total_positive"]["failed"] == 1
