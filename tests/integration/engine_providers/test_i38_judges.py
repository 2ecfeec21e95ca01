"""``judge:`` checks (The quality loop: judges), end to end through the emulator over
loopback: a model grades each answer; its calls are in the ledger with their own origin,
its verdicts stored by fingerprint so nothing is asked twice.

The emulator grades as a judge: a verdict request passes unless the record holds
``[[emulator judges fail: TEXT]]`` and the graded answer holds ``TEXT``; with
``[[emulator answers: …]]`` a record gets a bad answer once, a good one when repaired.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import e2e_support
import pytest
from e2e_support import chat_requests, project_yml

from agac import api
from agac.errors import UsageError
from agac.testing import write_project

BAD = json.dumps({"label": "bad", "total": -5})
JUDGE = (
    "{name: judged, judge: {model: openai/gpt-4o-mini, "
    "prompt: 'Record: {{ source.text }} Answer: {{ answer | tojson }}'}, "
    "message: 'the label must describe the invoice', on_fail: %s}"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(e2e_support, "TRANSPORT", "lean")
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def _project(root: Path, check: str, records: int = 3, run_mode: str = "online") -> None:
    text = f"""name: triage
input: {{path: data/, id_field: id}}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 256
  timeout: 10s
  run_mode: {run_mode}
  retry: {{max_attempts: 3, backoff: {{initial: 10ms, max: 50ms}}}}
actions:
  - name: invoice
    prompt: "Read this invoice: {{{{ source.text }}}}"
    schema:
      type: object
      properties:
        label: {{type: string}}
        total: {{type: number}}
      required: [label, total]
      additionalProperties: false
    checks:
      - {check}
"""
    rows = [
        {
            "id": f"r{i}",
            "text": f"invoice {i}"
            + (f' [[emulator answers: {BAD}]] [[emulator judges fail: "bad"]]' if i == 1 else ""),
        }
        for i in range(records)
    ]
    write_project(root, text, agac_yml=project_yml(), data={"data/in.jsonl": rows})


def _rows(project: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in api.export_rows("triage", "invoice", project)}


def _judge_ledger(project: Path) -> dict[str, Any]:
    rows = [r for r in api.cost("triage", project)["rows"] if r["origin"] == "judge"]
    assert len(rows) == 1, rows
    return rows[0]


def test_i38_judge_flag_marks_the_answer_it_fails(emulator: Any, project: Path) -> None:
    _project(project, JUDGE % "flag")

    summary = api.run("triage", project, progress=False).summary.to_dict()

    assert summary["state"] == "succeeded"
    assert summary["checks"]["invoice"]["judged"] == {"passed": 2, "failed": 1, "rate": 0.6667}
    rows = _rows(project)
    assert rows["r1"]["status"] == "answered" and rows["r1"]["checks"] == {"judged": False}
    assert rows["r1"]["detail"] == (
        "check_failed:judged: the label must describe the invoice (the judge says: the answer "
        'holds "bad")'
    )
    assert rows["r0"]["checks"] == {"judged": True} and rows["r0"]["detail"] is None
    # Three answers and three verdicts: the ledger holds each, the judges apart.
    assert chat_requests(emulator.stats(), "openai") == 6
    judges = _judge_ledger(project)
    assert (judges["calls"], judges["model"]) == (3, "gpt-4o-mini")
    assert judges["cost_usd"] > 0
    # The action's calls are what the emulator saw: its answers and their verdicts.
    assert summary["actions"]["invoice"]["calls"] == 6


def test_i38_judge_repair_asks_again_with_the_judges_reason(emulator: Any, project: Path) -> None:
    _project(project, JUDGE % "repair")

    summary = api.run("triage", project, progress=False).summary.to_dict()

    assert summary["checks"]["invoice"]["judged"] == {"passed": 3, "failed": 0, "rate": 1.0}
    row = _rows(project)["r1"]
    assert row["status"] == "answered" and row["output"]["label"] != "bad"
    (entry,) = api.record_session("r1", project)["actions"]
    # Each answer is kept before it is judged (the bad one too: it was paid for, and a
    # crash before its judge must not ask it again); the verdicts say why it was repaired.
    first, second = [a for a in entry["attempts"] if a["origin"] is None]
    assert (first["status"], second["status"]) == ("ok", "ok")
    judged = [(a["attempt"], a["status"]) for a in entry["attempts"] if a["origin"] == "judge"]
    assert judged == [(1, "ok"), (2, "ok")]  # each attempt's answer graded once
    # Four answers (one repaired), four verdicts.
    assert chat_requests(emulator.stats(), "openai") == 8
    assert _judge_ledger(project)["calls"] == 4


def test_i38_judge_fail_fails_the_unit_and_is_never_asked_twice(
    emulator: Any, project: Path
) -> None:
    _project(project, JUDGE % "fail")

    api.run("triage", project, progress=False)

    row = _rows(project)["r1"]
    assert (row["status"], row["reason"]) == ("failed", "check_failed")
    assert row["detail"].startswith("check 'judged' failed: the label must describe")
    assert chat_requests(emulator.stats(), "openai") == 6
    # A new run reuses every answer and every verdict: nothing is sent.
    again = api.run("triage", project, new=True, progress=False).summary.to_dict()
    assert again["actions"]["invoice"]["reasons"] == {"check_failed": 1}
    assert again["checks"]["invoice"]["judged"]["failed"] == 1
    assert chat_requests(emulator.stats(), "openai") == 6


def test_i38_judge_grades_answers_read_from_a_batch(emulator: Any, project: Path) -> None:
    _project(project, JUDGE % "flag", run_mode="batch")

    first = api.run("triage", project, progress=False)
    assert not first.final  # the batch is out
    emulator.advance(3600)
    second = api.run("triage", project, progress=False)
    assert not second.final  # the judges' batch is out
    emulator.advance(3600)
    summary = api.run("triage", project, progress=False).summary.to_dict()

    assert summary["state"] == "succeeded"
    assert summary["checks"]["invoice"]["judged"]["failed"] == 1
    assert _rows(project)["r1"]["checks"] == {"judged": False}
    # The judges go in a second batch, once each answer is read: nothing live.
    assert chat_requests(emulator.stats(), "openai") == 0
    assert _judge_ledger(project)["calls"] == 3


def test_i38_a_pilot_measures_a_judge_against_labels(emulator: Any, project: Path) -> None:
    _project(project, JUDGE % "flag", records=4)
    labels = project / "labels.csv"
    labels.write_text("key,judged\nr0,pass\nr1,fail\nr2,fail\nr3,pass\n", encoding="utf-8")

    report = api.pilot("triage", project, sample=4, labels=labels, progress=False)

    # The judge fails r1 (labelled bad: a true positive) and passes r2 (labelled bad too:
    # a false negative); r0 and r3 pass, as labelled.
    assert report["calibration"] == {
        "invoice": {
            "judged": {
                "labelled": 4,
                "agreement": 0.75,
                "tpr": 0.5,
                "fpr": 0.0,
                "confusion": {"tp": 1, "fp": 0, "tn": 2, "fn": 1},
                "uncalibrated": True,
            }
        }
    }
    (warning,) = [n for n in report["notes"] if "judge_uncalibrated" in n]
    assert "'judged' of invoice agrees with the labels on 75% of 4" in warning
    calibrated = api.pilot(
        "triage", project, sample=4, labels=labels, min_agreement=0.7, progress=False
    )
    assert not any("judge_uncalibrated" in n for n in calibrated["notes"])


def test_i38_labels_name_their_file_and_line_when_bad(emulator: Any, project: Path) -> None:
    _project(project, JUDGE % "flag", records=2)
    labels = project / "labels.csv"
    labels.write_text("key,judged\nr0,pass\nr1,maybe\n", encoding="utf-8")

    with pytest.raises(UsageError, match=r"labels.csv:3: judged is 'maybe'; write pass or fail"):
        api.pilot("triage", project, sample=2, labels=labels, progress=False)
    assert chat_requests(emulator.stats(), "openai") == 0  # nothing sent


def test_i38_a_judge_model_without_a_price_is_never_a_silent_zero(
    emulator: Any, project: Path
) -> None:
    _project(project, (JUDGE % "flag").replace("openai/gpt-4o-mini", "openai/gpt-internal-2099"))

    result = api.run("triage", project, progress=False)

    assert any(
        n.startswith("warning: model openai/gpt-internal-2099 has no known price")
        for n in result.notes
    )
    (row,) = [r for r in api.cost("triage", project)["rows"] if r["origin"] == "judge"]
    assert (row["model"], row["price"], row["cost_usd"]) == ("gpt-internal-2099", "unpriced", 0)
