"""``checks:`` on an llm action (The quality loop: checks): read into typed checks, on the
action or in ``defaults:``, kept in the run's snapshot; every bad check an error naming
file and line."""

from __future__ import annotations

from agac.config.model import CheckSpec, Workflow

BASE = """
input: {path: data.jsonl}
actions:
  - name: extract
    model: mock/m
    prompt: "Read {{ source.text }}"
    schema:
      type: object
      properties:
        total: {type: number}
        currency: {type: string}
      required: [total, currency]
"""


def test_i38_checks_are_read_and_kept_in_the_snapshot(wf) -> None:
    checked = wf.check(
        BASE
        + """    checks:
      - name: sane
        expr: "answer.total >= 0 and answer.currency in ['EUR', 'USD'] and source.text"
        message: a total is never negative
        on_fail: repair
        max_repairs: 2
      - {name: flagged, expr: "answer.total < 10000", on_fail: flag}
"""
    )
    assert checked.problems == []
    assert checked.workflow is not None
    action = checked.workflow.action("extract")
    assert action.checks == (
        CheckSpec(
            "sane",
            "answer.total >= 0 and answer.currency in ['EUR', 'USD'] and source.text",
            "a total is never negative",
            "repair",
            2,
        ),
        CheckSpec("flagged", "answer.total < 10000", None, "flag", 1),
    )
    again = Workflow.from_snapshot(checked.workflow.snapshot())
    assert again.action("extract").checks == action.checks
    assert again.config_hash == checked.workflow.config_hash


def test_i38_checks_in_defaults_apply_to_llm_actions(wf) -> None:
    checked = wf.check(
        """
input: {path: data.jsonl}
defaults:
  checks: [{name: has_text, expr: "answer.text | length > 0"}]
actions:
  - name: summary
    model: mock/m
    prompt: "Sum up {{ source.text }}"
  - name: tidy
    kind: tool
    function: builtins:len
"""
    )
    assert checked.workflow is not None, [p.render() for p in checked.problems]
    assert [c.name for c in checked.workflow.action("summary").checks] == ["has_text"]
    assert checked.workflow.action("tidy").checks == ()


def test_i38_check_reading_a_field_the_schema_lacks_is_an_error(wf) -> None:
    checked = wf.check(BASE + '    checks:\n      - {name: t, expr: "answer.totl >= 0"}\n')
    p = checked.one("check_reads_missing_field")
    assert p.severity == "error" and (p.file, p.line) == ("wf.yml", checked.line_of("answer.totl"))
    assert "'answer.totl'" in p.message and checked.workflow is None


def test_i38_check_reading_what_it_cannot_see_is_an_error(wf) -> None:
    checked = wf.check(BASE + '    checks:\n      - {name: t, expr: "answr.total >= 0"}\n')
    p = checked.one("undefined_variable")
    assert p.line == checked.line_of("answr.total") and p.hint == "did you mean 'answer'?"


def test_i38_bad_checks_are_errors_at_their_lines(wf) -> None:
    checked = wf.check(
        BASE
        + """    checks:
      - {name: a, expr: "answer.total >=", on_fail: fail}
      - {name: b, expr: "answer.total > 0", on_fail: repiar}
      - {name: c, expr: "answer.total > 0", when: x}
      - {name: c, expr: "answer.total > 1"}
      - {name: "d e", expr: "answer.total > 1"}
"""
    )
    assert checked.one("invalid_template").line == checked.line_of("name: a")
    on_fail = [p for p in checked.problems if "on_fail" in p.message]
    assert len(on_fail) == 1 and on_fail[0].hint == "did you mean 'repair'?"
    assert on_fail[0].line == checked.line_of("name: b")
    assert checked.one("unknown_key").line == checked.line_of("when: x")
    assert any("two checks are named 'c'" in p.message for p in checked.problems)
    assert any("'d e'" in p.message for p in checked.problems)
    assert checked.workflow is None
