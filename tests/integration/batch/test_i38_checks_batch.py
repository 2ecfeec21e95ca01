"""Checks on batch answers (The quality loop: checks): the verdicts are settled when the
batch is read, like a live answer's; the judges of a batch action, and the repairs its
checks ask for, go in batch rounds of their own (a second batch, at the batch price), or
live when the workflow says so; nothing is asked twice and the ledger equals what the
emulator saw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from batch_support import counts, creates, rows, run

from agac import api
from agac.api.batches import list_batches
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project


def rounds(project: Path, emulator: RunningEmulator, **options: object) -> tuple[int, object]:
    """Run until the run ends, advancing the emulator past each batch: (the runs that
    paused on a batch, the last run's result)."""
    paused = 0
    while True:
        result = run(project, **options)
        if result.exit_code != 75:
            return paused, result
        paused += 1
        assert paused < 8, result.summary
        emulator.advance(120)


def ledger_of(run_id: str, project: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in api.cost(run_id, project)["rows"]:
        out[row["origin"]] = out.get(row["origin"], 0) + row["calls"]
    return out


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


def test_i38_1_a_repair_of_a_batch_answer_goes_in_the_next_batch_round(
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

    paused, done = rounds(project, emulator)

    assert paused == 2  # the answers' batch, then the repair's
    classify = counts(done)
    assert (classify["answered"], classify["reasons"]) == (3, {})
    assert creates(emulator.stats(), "openai") == 2
    assert emulator.stats()["requests"]["openai"].get("chat", 0) == 0  # nothing live
    got = rows(project)
    assert got["r1"]["output"]["total"] >= 0  # the repaired answer
    assert got["r1"]["checks"] == {"total_positive": True, "labelled": True}
    assert done.summary["checks"]["classify"]["total_positive"]["failed"] == 0
    # The repair went in a batch of its own, sent once, and is ledgered on classify.
    made = [b["action"] for b in list_batches("bw", project)]
    assert sorted(made) == ["classify", "classify.repair"]
    assert ledger_of(done.run_id, project) == {"call": 4}
    # A later run pays for nothing: the answer and its repair are both stored.
    again = run(project, new=True)
    assert counts(again)["answered"] == 3 and creates(emulator.stats(), "openai") == 2
    assert rows(project)["r1"]["output"] == got["r1"]["output"]


def test_i38_1_a_repair_of_a_batch_answer_online_when_the_check_says_so(
    emulator: RunningEmulator, project: Path
) -> None:
    data = [
        {
            "id": f"r{i}",
            "text": f"invoice {i}" + (f" [[emulator answers: {BAD}]]" if i == 1 else ""),
        }
        for i in range(3)
    ]
    text = WORKFLOW.replace("on_fail: repair}", "on_fail: repair, repair_run_mode: online}")
    write_project(project, text, data={"data/a.jsonl": data})

    paused, done = rounds(project, emulator)

    assert paused == 1 and creates(emulator.stats(), "openai") == 1
    assert emulator.stats()["requests"]["openai"]["chat"] == 1  # the repair, live
    got = rows(project)
    assert got["r1"]["status"] == "answered" and got["r1"]["output"]["total"] >= 0
    assert ledger_of(done.run_id, project) == {"call": 4}


def test_i38_1_a_repair_that_fails_in_its_batch_names_its_reason(
    emulator: RunningEmulator, project: Path
) -> None:
    data = [
        {"id": "r0", "text": "invoice 0"},
        {"id": "r1", "text": f"invoice 1 [[emulator answers: {BAD}]]"},
    ]
    write_project(project, WORKFLOW, data={"data/a.jsonl": data})
    fault = {"batch_end": "expired", "answered": 0}  # the second batch: the repair's
    emulator.add_fault(
        {"provider": "openai", "op": "batch.create", "nth": 2, "times": 1, "fault": fault}
    )

    paused, _ = rounds(project, emulator)

    assert paused == 2  # the answers' batch, then the repair's (expired)
    got = rows(project)
    assert (got["r1"]["status"], got["r1"]["reason"]) == ("failed", "batch_expired")
    assert "its repair failed in the batch" in got["r1"]["detail"]
    assert "no negative total" in got["r1"]["detail"]
    assert got["r1"]["checks"] == {"total_positive": False, "labelled": False}
    assert got["r0"]["status"] == "answered"


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
    ("on_fail", "status", "reason", "paused", "asked"),
    [
        ("flag", "answered", None, 2, 3),
        ("fail", "failed", "check_failed", 2, 3),
        ("repair", "answered", None, 4, 4),  # r1 repaired in a third round, judged in a 4th
    ],
)
def test_i38_1_each_on_fail_of_a_judge_in_batch_with_the_ledger_equal_to_the_emulator(
    emulator: RunningEmulator,
    project: Path,
    on_fail: str,
    status: str,
    reason: str | None,
    paused: int,
    asked: int,
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

    waited, done = rounds(project, emulator)

    assert waited == paused
    got = rows(project)
    assert (got["r1"]["status"], got["r1"]["reason"]) == (status, reason)
    assert got["r0"]["checks"] == got["r2"]["checks"] == {"judged": True}
    if on_fail == "repair":  # repaired in a batch round, its repair judged in another
        assert got["r1"]["checks"] == {"judged": True} and got["r1"]["output"]["total"] >= 0
    else:
        assert got["r1"]["checks"] == {"judged": False}
        assert "the label must describe the invoice" in got["r1"]["detail"]
    # Every answer, judge and repair went in a batch (a round each), none live: the
    # ledger holds exactly the calls the emulator saw, each origin apart.
    stats = emulator.stats()["requests"]["openai"]
    assert creates(emulator.stats(), "openai") == paused and stats.get("chat", 0) == 0
    assert ledger_of(done.run_id, project) == {"call": asked, "judge": asked}
    tiers = {r["tier"] for r in api.cost(done.run_id, project)["rows"] if r["origin"] == "judge"}
    assert tiers == {"batch"}  # judges at the batch price
    failed = 0 if on_fail == "repair" else 1
    assert done.summary["checks"]["classify"]["judged"]["failed"] == failed
    batches = sorted(b["action"] for b in list_batches("bw", project))
    assert batches[:2] == ["classify", "classify.judge.judged"]


def test_i38_1_a_judge_of_a_batch_action_online_when_it_says_so(
    emulator: RunningEmulator, project: Path
) -> None:
    data = [{"id": f"r{i}", "text": f"invoice {i}"} for i in range(3)]
    text = (JUDGED % "flag").replace('prompt: "Record:', 'run_mode: online, prompt: "Record:')
    write_project(project, text, data={"data/a.jsonl": data})

    waited, done = rounds(project, emulator)

    assert waited == 1 and creates(emulator.stats(), "openai") == 1
    assert emulator.stats()["requests"]["openai"]["chat"] == 3  # the judges, live
    assert ledger_of(done.run_id, project) == {"call": 3, "judge": 3}


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
    # A new run with room reuses the three answers and asks only their judges (a batch).
    assert run(project, new=True).exit_code == 75
    emulator.advance(120)
    third = run(project)
    assert counts(third)["answered"] == 3
    assert emulator.stats()["requests"]["openai"].get("chat", 0) == 0
    assert creates(emulator.stats(), "openai") == 2
    assert ledger_of(third.run_id, project) == {"judge": 3}
