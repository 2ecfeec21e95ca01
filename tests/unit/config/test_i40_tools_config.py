"""Tools per record, configuration: ``tools:`` on an llm action, ``max_turns`` and
``max_tool_calls``; every bad entry named at its file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from agac.config.model import DEFAULT_MAX_TURNS, EffectSpec, Workflow

BASE = """
input: {path: data.jsonl}
actions:
"""

TOOLS = '''
import enum
from typing import Literal


class Size(enum.Enum):
    S = "s"
    L = "l"


def lookup(order_id: str, limit: int = 3) -> dict:
    """Find an order.

    Args:
        order_id: the order's id.
        limit: how many lines
            to show.
    """
    return {}


def shaped(kind: Literal["a", "b"], size: Size, tags: list[str], extra: dict[str, float] | None = None, ctx=None) -> str:
    """Shapes."""
    return ""


class Opaque:
    pass


def opaque(thing: Opaque) -> str:
    return ""


def untyped(thing) -> str:
    return ""
'''


@pytest.fixture
def tools(in_tmp_project: Path) -> Path:
    (in_tmp_project / "tools").mkdir()
    (in_tmp_project / "tools" / "__init__.py").write_text("")
    (in_tmp_project / "tools" / "orders.py").write_text(TOOLS)
    return in_tmp_project


def test_i40_tools_config_reads_entries_and_bounds(wf, tools: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    checked = wf.check(
        BASE
        + """
  - name: reply
    model: openai/gpt-4o-mini
    prompt: x
    tools:
      - tools.orders:lookup
      - {function: tools.orders:shaped, name: shapes, description: Shapes of things, timeout: 5s}
      - function: tools.orders:opaque
        schema: {type: object, properties: {thing: {type: string}}}
    max_turns: 3
    max_tool_calls: 5
  - {name: plain, model: mock/m, prompt: y}
"""
    )
    assert checked.problems == []
    assert checked.workflow is not None
    reply = checked.workflow.action("reply")
    assert [t.name for t in reply.tools] == ["lookup", "shapes", "opaque"]
    assert reply.tools[1].description == "Shapes of things" and reply.tools[1].timeout == 5.0
    assert reply.tools[2].schema == {"type": "object", "properties": {"thing": {"type": "string"}}}
    assert (reply.max_turns, reply.max_tool_calls) == (3, 5)
    plain = checked.workflow.action("plain")
    assert (plain.tools, plain.max_turns, plain.max_tool_calls) == ((), DEFAULT_MAX_TURNS, None)
    # A run keeps the tools in its config and reads them back the same.
    again = Workflow.from_snapshot(checked.workflow.snapshot())
    assert again.action("reply") == reply and again.config_hash == checked.workflow.config_hash


def test_i40_tools_config_leaves_the_hash_of_workflows_without_tools(wf) -> None:
    text = BASE + "  - {name: plain, model: mock/m, prompt: y}\n"
    checked = wf.check(text)
    assert checked.workflow is not None
    assert "tools" not in checked.workflow.snapshot()["actions"][0]
    assert "max_turns" not in checked.workflow.snapshot()["actions"][0]


def test_i40_tools_config_unknown_function_names_file_and_line(wf, tools: Path) -> None:
    checked = wf.check(
        BASE
        + """
  - name: reply
    model: mock/m
    prompt: x
    tools:
      - tools.orders:lookup
      - tools.orders:nope
      - nowhere_xyz:f
      - not a spec
"""
    )
    found = sorted(p.line for p in checked.problems if p.code == "invalid_function")
    assert found == [
        checked.line_of("tools.orders:nope"),
        checked.line_of("nowhere_xyz:f"),
        checked.line_of("not a spec"),
    ]
    assert all(p.file == "wf.yml" for p in checked.problems)


def test_i40_tools_config_bad_schema_names_file_and_line(wf, tools: Path) -> None:
    checked = wf.check(
        BASE
        + """
  - name: reply
    model: mock/m
    prompt: x
    tools:
      - tools.orders:opaque
      - tools.orders:untyped
      - {function: tools.orders:lookup, schema: {type: string}}
      - {function: tools.orders:lookup, name: again, schema: {type: object, properties: 3}}
"""
    )
    bad = sorted((p.line, p.message) for p in checked.problems if p.code == "invalid_schema")
    assert [line for line, _ in bad] == [
        checked.line_of("tools.orders:opaque"),
        checked.line_of("tools.orders:untyped"),
        checked.line_of("schema: {type: string}"),
        checked.line_of("properties: 3"),
    ]
    assert "parameter 'thing'" in bad[0][1] and "schema:" in bad[0][1]
    assert "has no type hint" in bad[1][1]


def test_i40_tools_config_bounds_without_tools_and_tools_in_batch_are_errors(
    wf, tools: Path
) -> None:
    checked = wf.check(
        BASE
        + """
  - {name: a, model: mock/m, prompt: x, max_turns: 3}
  - {name: b, model: mock/m, prompt: x, tools: [tools.orders:lookup], max_turns: 0}
  - {name: c, model: mock/m, prompt: x, tools: [tools.orders:lookup], run_mode: batch}
  - {name: d, model: mock/m, prompt: x, tools: [tools.orders:lookup, tools.orders:lookup]}
  - {name: e, kind: tool, function: tools.orders:lookup, tools: [tools.orders:lookup]}
"""
    )
    by_line: dict[int, set[str]] = {}
    for p in checked.problems:
        by_line.setdefault(p.line, set()).add(p.code)
    assert "invalid_value" in by_line[checked.line_of("name: a")]
    assert "invalid_value" in by_line[checked.line_of("name: b")]
    assert "not_available_yet" in by_line[checked.line_of("name: c")]
    assert "invalid_value" in by_line[checked.line_of("name: d")]
    assert "not_an_llm_action" in by_line[checked.line_of("name: e")]
    # The mock provider speaks no tool protocol: a tool loop on it is refused at its line.
    assert "not_available_yet" in by_line[checked.line_of("name: b")]


def test_i40_b14_tools_in_batch_where_the_batch_reads_tool_calls(wf, tools: Path) -> None:
    checked = wf.check(
        BASE
        + """
  - {name: a, model: openai/gpt-4o-mini, prompt: x, tools: [tools.orders:lookup], run_mode: batch}
  - {name: b, model: anthropic/claude-haiku-4-5, prompt: x, tools: [tools.orders:lookup], run_mode: auto}
  - {name: c, model: gemini/gemini-2.5-flash, prompt: x, tools: [tools.orders:lookup], run_mode: batch}
  - {name: d, model: bedrock/anthropic.claude-3-5-haiku-20241022-v1:0, prompt: x, tools: [tools.orders:lookup], run_mode: batch}
"""
    )
    refused = {p.line for p in checked.problems if p.code == "not_available_yet"}
    assert refused == {checked.line_of("name: d")}
    (problem,) = [p for p in checked.problems if p.code == "not_available_yet"]
    assert "batch rounds" in problem.message and "run_mode: online" in (problem.hint or "")


def test_i40_tools_config_effect_reads_true_or_a_mapping_and_names_bad_ones(
    wf, tools: Path, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    good = wf.check(
        BASE
        + """
  - name: reply
    model: openai/gpt-4o-mini
    prompt: x
    tools:
      - {function: tools.orders:lookup, effect: true}
      - {function: tools.orders:shaped, effect: {idempotent: true, compensate: tools.orders:lookup}}
      - {function: tools.orders:opaque, effect: false, schema: {type: object}}
"""
    )
    assert good.problems == [] and good.workflow is not None
    reply = good.workflow.action("reply")
    assert [t.effect for t in reply.tools] == [
        EffectSpec(),
        EffectSpec(idempotent=True, compensate="tools.orders:lookup"),
        None,
    ]
    again = Workflow.from_snapshot(good.workflow.snapshot())
    assert again.action("reply") == reply and again.config_hash == good.workflow.config_hash

    bad = wf.check(
        BASE
        + """
  - name: reply
    model: openai/gpt-4o-mini
    prompt: x
    tools:
      - {function: tools.orders:lookup, effect: "yes"}
      - {function: tools.orders:shaped, effect: {idempotent: true, undo: x}}
"""
    )
    lines = sorted(p.line for p in bad.problems)
    assert lines == [bad.line_of('effect: "yes"'), bad.line_of("undo: x")], bad.problems
    assert all(p.file == "wf.yml" for p in bad.problems)


def test_i40_tools_config_without_effect_keeps_the_hash_it_had(
    wf, tools: Path, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    text = BASE + "  - {name: reply, model: openai/m, prompt: x, tools: [tools.orders:lookup]}\n"
    checked = wf.check(text)
    assert checked.workflow is not None
    (tool,) = checked.workflow.snapshot()["actions"][0]["tools"]
    assert "effect" not in tool
