"""Issue 22 item 1: ``attachments:`` and ``attachments_position:`` on llm actions —
typed, located errors for a wrong template, refused where the provider or model takes no
files, and in the workflow schema."""

from __future__ import annotations

import pytest

from agac.config.schema import workflow_schema

BASE = """
input: {path: data.jsonl}
actions:
"""


def test_i22_1_attachments_are_read_into_the_action(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: read
    model: mock/m
    prompt: "Read it"
    attachments: ["{{ source.file }}", "scans/{{ source.id }}.png"]
    attachments_position: after
"""
    )
    assert checked.problems == []
    action = checked.workflow.action("read")
    assert action.attachments == ("{{ source.file }}", "scans/{{ source.id }}.png")
    assert action.attachments_position == "after"


def test_i22_1_an_action_without_attachments_keeps_its_config_hash(wf) -> None:
    plain = wf.check(BASE + "  - name: a\n    model: mock/m\n    prompt: x\n").workflow
    empty = wf.check(
        BASE + "  - name: a\n    model: mock/m\n    prompt: x\n    attachments: []\n"
    ).workflow
    assert plain is not None and empty is not None
    assert plain.config_hash == empty.config_hash
    assert "attachments" not in plain.snapshot()["actions"][0]


def test_i22_1_attachments_must_be_a_list_of_templates(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: read
    model: mock/m
    prompt: "Read it"
    attachments: "{{ source.file }}"
"""
    )
    p = checked.one("invalid_value")
    assert p.line == checked.line_of("attachments:") and "list" in p.message


def test_i22_1_attachments_position_is_before_or_after(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: read
    model: mock/m
    prompt: "Read it"
    attachments: ["{{ source.file }}"]
    attachments_position: middle
"""
    )
    p = checked.one("invalid_value")
    assert p.line == checked.line_of("attachments_position")


def test_i22_1_a_broken_attachment_template_is_located(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: read
    model: mock/m
    prompt: "Read it"
    attachments:
      - "{{ source.file }}"
      - "{{ source.file "
"""
    )
    p = checked.one("invalid_template")
    assert p.line == checked.line_of('"{{ source.file "') and "attachments[1]" in p.message


def test_i22_1_an_attachment_template_reading_what_it_cannot_see(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: read
    model: mock/m
    prompt: "Read it"
    attachments: ["{{ classify.file }}"]
"""
    )
    assert checked.one("undefined_variable").line == checked.line_of("attachments:")


def test_i22_1_attachments_on_a_tool_are_not_an_llm_key(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: t
    kind: tool
    function: tools:f
    attachments: ["{{ source.file }}"]
"""
    )
    assert "not_an_llm_action" in checked.codes()


@pytest.mark.parametrize("model", ["groq/llama-3.3-70b-versatile"])
def test_i22_1_a_model_that_takes_no_files_is_refused_at_validation(
    wf, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "k")
    checked = wf.check(
        BASE
        + f"""
  - name: read
    model: {model}
    prompt: "Read it"
    attachments: ["{{{{ source.file }}}}"]
"""
    )
    p = checked.one("attachment_not_supported")
    assert p.line == checked.line_of("attachments:")
    assert "groq" in p.message and "llama-3.3-70b-versatile" in p.message


def test_i22_1_the_workflow_schema_has_the_new_keys() -> None:
    schema = workflow_schema()
    for where in ("action", "defaults"):
        props = schema["definitions"][where]["properties"]
        assert props["attachments"]["type"] == "array"
        assert props["attachments_position"]["enum"] == ["before", "after"]
