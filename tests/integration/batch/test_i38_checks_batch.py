"""Checks on batch answers (The quality loop: checks): the verdicts are settled when the
batch is read, like a live answer's; a ``repair`` check an answer from a batch fails makes
the unit fail ``check_failed`` (repairs are asked live only), and nothing is asked twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from batch_support import counts, creates, rows, run

from agac import api
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


JUDGED = """name: bw
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
      - name: judged
        judge: {model: openai/gpt-4o-mini, prompt: "Record: {{ source.text }} Grade {{ answer | tojson }}"}
        message: the label must describe the invoice
        on_fail: %s
"""


@pytest.mark.parametrize(
    ("on_fail", "status", "reason"),
    [
        ("flag", "answered", None),
        ("fail", "failed", "check_failed"),
        ("repair", "failed", "check_failed"),
    ],
)
def test_i38_1_each_on_fail_of_a_judge_in_batch_with_the_ledger_equal_to_the_emulator(
    emulator: RunningEmulator, project: Path, on_fail: str, status: str, reason: str | None
) -> None:
    data = [
        {
            "id": f"r{i}",
            "text": f"invoice {i}"
            + (f' [[emulator answers: {BAD}]] [[emulator judges fail: "bad"]]' if i == 1 else ""),
        }
        for i in range(3)
    ]
    write_project(project, JUDGED % on_fail, data={"data/a.jsonl": data})

    first = run(project)
    assert first.exit_code == 75
    emulator.advance(120)
    second = run(project)

    got = rows(project)
    assert (got["r1"]["status"], got["r1"]["reason"]) == (status, reason)
    assert got["r1"]["checks"] == {"judged": False}
    assert got["r0"]["checks"] == got["r2"]["checks"] == {"judged": True}
    assert "the label must describe the invoice" in got["r1"]["detail"]
    if on_fail == "repair":  # an answer read from a batch is not asked again live
        assert "not repaired" in got["r1"]["detail"]
    # One batch of three answers, then a judge per answer once the batch is read: the
    # ledger holds exactly the calls the emulator saw, each origin apart.
    stats = emulator.stats()["requests"]["openai"]
    assert creates(emulator.stats(), "openai") == 1 and stats["chat"] == 3
    ledger: dict[str, int] = {}
    for row in api.cost(second.run_id, project)["rows"]:
        ledger[row["origin"]] = ledger.get(row["origin"], 0) + row["calls"]
    assert ledger == {"call": 3, "judge": 3}
    assert second.summary["checks"]["classify"]["judged"] == {
        "passed": 2,
        "failed": 1,
        "rate": 0.6667,
    }


def test_i38_3_a_judge_of_batch_answers_spends_from_the_budget(
    emulator: RunningEmulator, project: Path
) -> None:
    data = [{"id": f"r{i}", "text": f"invoice {i}"} for i in range(3)]
    text = (JUDGED % "flag").replace('prompt: "Record:', 'max_tokens: 4000, prompt: "Record:')
    write_project(project, text, data={"data/a.jsonl": data})

    # $0.001 holds the batch of three answers, not one judge's worst case (4,000 out).
    assert run(project, budget_usd=0.001, allow_over_estimate=True).exit_code == 75
    emulator.advance(120)
    second = run(project)

    got = rows(project)
    assert {k: (r["status"], r["reason"]) for k, r in got.items()} == {
        k: ("skipped", "budget_exhausted") for k in ("r0", "r1", "r2")
    }
    assert got["r0"]["detail"].startswith("the judge of check 'judged' was never sent")
    assert emulator.stats()["requests"]["openai"].get("chat", 0) == 0
    ledger = {r["origin"]: r["calls"] for r in api.cost(second.run_id, project)["rows"]}
    assert ledger == {"call": 3}
    # A new run with room reuses the three answers and asks only their judges.
    third = run(project, new=True)
    assert counts(third)["answered"] == 3
    assert emulator.stats()["requests"]["openai"]["chat"] == 3
    assert creates(emulator.stats(), "openai") == 1
