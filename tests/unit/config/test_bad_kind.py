"""Issue 29 item 16: an action with a bad ``kind:`` is reported, and still checked — its
other errors are reported too — and it stays known to the actions that depend on it (no
``unknown_dependency`` for them)."""

from __future__ import annotations

import pytest

WORKFLOW = """
input: {path: data.jsonl}
actions:
  - name: a
    kind: KIND
    function: "not a function"
    max_concurrency: 0
  - name: b
    dependencies: [a]
    model: mock/m
    prompt: "{{ a.x }}"
"""


@pytest.mark.parametrize("kind", ["tol", "python", "Tool"])
def test_i29_16_a_bad_kind_hides_no_other_error(wf, kind: str) -> None:
    checked = wf.check(WORKFLOW.replace("KIND", kind))
    codes = checked.codes()
    (bad,) = [p for p in checked.problems if p.path == "actions[0].kind"]
    assert (bad.code, bad.line) == ("invalid_value", checked.line_of("kind:"))
    assert "invalid_function" in codes, codes
    assert "unknown_dependency" not in codes and "undefined_variable" not in codes, codes
    assert any("max_concurrency" in p.message for p in checked.problems), codes
    assert checked.workflow is None


def test_i29_16_a_bad_kind_is_checked_as_the_kind_it_most_likely_means(wf) -> None:
    checked = wf.check("""
input: {path: data.jsonl}
actions:
  - name: a
    kind: lm
    model: "not a model"
    prompt: "{{ nothing }}"
""")
    codes = sorted(checked.codes())
    assert codes == ["invalid_model", "invalid_value", "undefined_variable"], codes
