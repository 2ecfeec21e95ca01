"""``judge:`` checks (The quality loop: judges): read into typed judges, kept in the run's
snapshot (an expression check's snapshot unchanged); a bad judge an error at its line."""

from __future__ import annotations

from agac.config.model import CheckSpec, JudgeSpec, Workflow

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
      required: [total]
    checks:
"""


def test_i38_judge_is_read_and_kept_in_the_snapshot(wf) -> None:
    checked = wf.check(
        BASE
        + """      - name: graded
        judge:
          model: openai/gpt-4o-mini
          prompt: "Is {{ answer | tojson }} the total of {{ source.text }}?"
          max_tokens: 100
        on_fail: repair
      - {name: sane, expr: "answer.total >= 0"}
"""
    )
    assert checked.problems == []
    assert checked.workflow is not None
    graded, sane = checked.workflow.action("extract").checks
    assert graded == CheckSpec(
        "graded",
        None,
        None,
        "repair",
        1,
        JudgeSpec(
            "openai/gpt-4o-mini",
            "openai",
            "gpt-4o-mini",
            "Is {{ answer | tojson }} the total of {{ source.text }}?",
            None,
            100,
        ),
    )
    assert (
        sane.judge is None and "judge" not in checked.workflow.snapshot()["actions"][0]["checks"][1]
    )
    again = Workflow.from_snapshot(checked.workflow.snapshot())
    assert again.action("extract").checks == (graded, sane)
    assert again.config_hash == checked.workflow.config_hash
    assert checked.workflow.providers == {"mock", "openai"}


def _codes(checked) -> list[tuple[str, str]]:
    return [(p.code, p.message) for p in checked.problems if p.severity == "error"]


def test_i38_a_check_has_an_expr_or_a_judge_not_both(wf) -> None:
    checked = wf.check(
        BASE
        + """      - {name: both, expr: "answer.total", judge: {model: mock/m, prompt: "x"}}
      - {name: neither, message: "what?"}
"""
    )
    codes = [c for c, _ in _codes(checked)]
    assert codes == ["invalid_value", "invalid_value"]


def test_i38_judge_model_and_templates_are_checked(wf) -> None:
    checked = wf.check(
        BASE
        + """      - {name: a, judge: {model: nobody/m, prompt: "ok {{ answer }}"}}
      - {name: b, judge: {model: mock/m, prompt: "{{ answr }}"}}
      - {name: c, judge: {model: mock/m, prompt: "{{ answer", temperature: 1}}
"""
    )
    found = _codes(checked)
    assert sorted(c for c, _ in found) == [
        "invalid_template",
        "undefined_variable",
        "unknown_key",
        "unknown_provider",
    ]
    assert any("answr" in m for _, m in found)


def test_i38_1_judge_run_mode_and_repair_run_mode_are_read_and_checked_at_their_line(wf) -> None:
    good = wf.check(
        BASE
        + """      - name: graded
        judge: {model: mock/m, prompt: "ok {{ answer }}", run_mode: online}
        on_fail: repair
        repair_run_mode: batch
"""
    )
    assert _codes(good) == []
    (check,) = good.workflow.actions[0].checks
    assert (check.judge.run_mode, check.repair_run_mode) == ("online", "batch")
    bad = wf.check(
        BASE
        + """      - name: graded
        judge: {model: mock/m, prompt: "ok {{ answer }}", run_mode: batched}
        on_fail: repair
        repair_run_mode: live
"""
    )
    found = [p for p in bad.problems if p.severity == "error"]
    assert [p.code for p in found] == ["invalid_value", "invalid_value"]
    assert all(p.file.endswith("wf.yml") for p in found)
    assert [p.line for p in found] == [bad.line_of("run_mode: batched"), bad.line_of("live")]
    assert "did you mean 'batch'" in (found[0].hint or "") or "batch" in found[0].message
