"""Checks on an llm action (The quality loop: checks), end to end through the emulator.

A record's text scripts a bad answer (``[[emulator answers: …]]``: the emulator answers it
once, and properly once shown its answer and told what is wrong). Each ``on_fail`` path is
run online; the ledger (the run's counted calls and the record's session) equals the calls
the emulator saw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from e2e_support import chat_requests, project_yml, run, sent_requests

from agac import api
from agac.cli.main import cli
from agac.testing import write_project

BAD = json.dumps({"label": "bad", "total": -5})


def _project(root: Path, check: str, records: int = 3, bad: tuple[int, ...] = (1,)) -> None:
    text = f"""name: triage
input: {{path: data/, id_field: id}}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 256
  timeout: 10s
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
            "text": f"invoice {i}" + (f" [[emulator answers: {BAD}]]" if i in bad else ""),
        }
        for i in range(records)
    ]
    write_project(root, text, agac_yml=project_yml(), data={"data/in.jsonl": rows})


def _attempts(project: Path, key: str) -> list[dict[str, Any]]:
    session = api.record_session(key, project)
    (entry,) = [a for a in session["actions"] if a["action"] == "invoice"]
    return list(entry["attempts"])


def _rows(project: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in api.export_rows("triage", "invoice", project)}


POSITIVE = (
    "{name: total_positive, expr: 'answer.total >= 0', "
    "message: 'the total cannot be negative', on_fail: %s}"
)


def test_i38_check_repair_asks_again_with_the_message(
    emulator: Any, project: Path, monkeypatch: Any
) -> None:
    _project(project, POSITIVE % "repair")
    sent = sent_requests(monkeypatch, "openai")

    summary = run(project).summary

    counts = summary["actions"]["invoice"]
    assert summary["state"] == "succeeded" and counts["answered"] == 3
    assert counts["calls"] == 4 == chat_requests(emulator.stats(), "openai") == len(sent)
    first, second = _attempts(project, "r1")
    assert (first["status"], second["status"]) == ("error", "ok")
    assert first["error"].startswith("check_failed")
    (repair,) = [
        r
        for r in sent
        if len(r.messages) > 1
        and r.messages[-1].role == "user"
        and "total_positive" in r.messages[-1].content
    ]
    assert repair.messages[-2].role == "assistant"
    assert json.loads(repair.messages[-2].content) == json.loads(BAD)  # as stored
    assert "the total cannot be negative" in repair.messages[-1].content
    row = _rows(project)["r1"]
    assert row["status"] == "answered" and row["output"]["total"] >= 0


def test_i38_check_repair_fails_check_failed_after_max_repairs(
    emulator: Any, project: Path
) -> None:
    check = (
        "{name: huge, expr: 'answer.total > 1000', message: 'the total must be over 1000',"
        " on_fail: repair, max_repairs: 2}"
    )
    _project(project, check, records=1, bad=())

    summary = run(project).summary

    counts = summary["actions"]["invoice"]
    assert counts["reasons"] == {"check_failed": 1}
    assert counts["calls"] == 3 == chat_requests(emulator.stats(), "openai")
    assert [a["attempt"] for a in _attempts(project, "r0")] == [1, 2, 3]
    row = _rows(project)["r0"]
    assert (row["status"], row["reason"]) == ("failed", "check_failed")
    assert "'huge'" in row["detail"] and "after 2 repairs" in row["detail"]


def test_i38_check_flag_answers_and_marks_the_unit(emulator: Any, project: Path) -> None:
    _project(project, POSITIVE % "flag")

    summary = run(project).summary

    counts = summary["actions"]["invoice"]
    assert summary["state"] == "succeeded" and counts["answered"] == 3
    assert counts["calls"] == 3 == chat_requests(emulator.stats(), "openai")
    rows = _rows(project)
    assert rows["r1"]["status"] == "answered" and rows["r1"]["output"]["total"] == -5
    assert rows["r1"]["detail"].startswith("check_failed:total_positive: ")
    assert "the total cannot be negative" in rows["r1"]["detail"]
    assert rows["r0"]["detail"] is None


def test_i38_check_fail_fails_the_unit_naming_the_check(emulator: Any, project: Path) -> None:
    _project(project, POSITIVE % "fail")

    summary = run(project).summary

    counts = summary["actions"]["invoice"]
    assert (counts["answered"], counts["reasons"]) == (2, {"check_failed": 1})
    assert counts["calls"] == 3 == chat_requests(emulator.stats(), "openai")
    row = _rows(project)["r1"]
    assert (row["status"], row["reason"]) == ("failed", "check_failed")
    assert row["detail"] == "check 'total_positive' failed: the total cannot be negative"
    # The bad answer was paid for: it is stored, and a new run judges it again unasked.
    summary = run(project, new=True).summary
    counts = summary["actions"]["invoice"]
    assert counts["reasons"] == {"check_failed": 1} and counts["calls"] == 0
    assert chat_requests(emulator.stats(), "openai") == 3


def test_i38_each_checks_verdict_is_kept_in_status_export_and_session(
    emulator: Any, project: Path
) -> None:
    _project(
        project,
        (POSITIVE % "flag") + "\n      - {name: labelled, expr: 'answer.label', on_fail: flag}",
    )

    summary = run(project).summary

    assert summary["checks"] == {
        "invoice": {
            "total_positive": {"passed": 2, "failed": 1, "rate": 0.6667},
            "labelled": {"passed": 3, "failed": 0, "rate": 1.0},
        }
    }
    assert api.status("triage", project)["checks"] == summary["checks"]
    rows = _rows(project)
    assert rows["r1"]["checks"] == {"total_positive": False, "labelled": True}
    assert rows["r0"]["checks"] == {"total_positive": True, "labelled": True}
    out = project / "invoice.csv"
    api.export_action("triage", "invoice", out, format="csv", project=project)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "key,status,reason,detail,output,tenant,check.total_positive,check.labelled"
    cells = {line.split(",")[0]: line.rsplit(",", 2)[1:] for line in lines[1:]}
    assert cells == {"r0": ["pass", "pass"], "r1": ["fail", "pass"], "r2": ["pass", "pass"]}
    (entry,) = [a for a in api.record_session("r1", project)["actions"]]
    assert entry["checks"] == {"total_positive": False, "labelled": True}
    runner = CliRunner()
    status = runner.invoke(cli, ["status", "triage"], catch_exceptions=False)
    assert "invoice checks passed: total_positive 67% (2/3), labelled 100% (3/3)" in status.output
    shown = runner.invoke(cli, ["records", "show", "r1"], catch_exceptions=False)
    assert "checks: total_positive FAIL, labelled pass" in shown.output


def test_i38_a_repaired_answer_passes_its_checks(emulator: Any, project: Path) -> None:
    _project(project, POSITIVE % "repair")

    summary = run(project).summary

    rate = summary["checks"]["invoice"]["total_positive"]
    assert rate == {"passed": 3, "failed": 0, "rate": 1.0}
    assert _rows(project)["r1"]["checks"] == {"total_positive": True}


def test_i38_a_shared_answer_is_judged_for_each_unit_sharing_it(
    emulator: Any, project: Path
) -> None:
    # Two records ask the same request; it is asked once (S5) while both wait on it. The
    # answer is judged for each of them: the check reads the record, not just the answer.
    text = """name: triage
input: {path: data/, id_field: id}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 256
  max_concurrency: 4
  timeout: 10s
actions:
  - name: invoice
    prompt: "Read this invoice: {{ source.text }}"
    schema:
      type: object
      properties:
        label: {type: string}
        total: {type: number}
      required: [label, total]
      additionalProperties: false
    checks:
      - {name: vip, expr: "source.vip", on_fail: flag}
"""
    rows = [{"id": "a", "text": "same", "vip": True}, {"id": "b", "text": "same", "vip": False}]
    write_project(project, text, agac_yml=project_yml(), data={"data/in.jsonl": rows})
    emulator.add_fault({"provider": "openai", "op": "chat", "fault": {"delay_ms": 200}})

    summary = run(project).summary

    assert chat_requests(emulator.stats(), "openai") == 1
    assert summary["actions"]["invoice"]["reused"] == 1
    assert summary["checks"]["invoice"]["vip"] == {"passed": 1, "failed": 1, "rate": 0.5}
    got = _rows(project)
    assert (got["a"]["checks"], got["b"]["checks"]) == ({"vip": True}, {"vip": False})
    assert got["b"]["detail"] == "check_failed:vip: source.vip is false"
