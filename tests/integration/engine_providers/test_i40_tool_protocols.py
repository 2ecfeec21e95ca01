"""Tools per record on Anthropic's ``tool_use``/``tool_result`` blocks, Gemini's
``functionCall``/``functionResponse`` parts and Ollama's ``message.tool_calls`` (arguments
as objects, results as ``tool`` messages naming the function), online on both transports (the ``project``
fixture) against the emulator: the model asks for calls, agac runs the project's
functions, sends every result of a turn back together in the provider's form, and the
model answers with them; a turn's text and call ids survive the round trip.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_support import MODELS, chat_requests, project_yml, sent_requests

from agac import api
from agac.testing import write_project

TOOLS = '''\
"""Order lookups; each call appends its arguments to calls.log."""

from pathlib import Path


def lookup(order_id: str) -> dict:
    """Find an order in the shop's system."""
    with (Path(__file__).parent / "calls.log").open("a", encoding="utf-8") as log:
        log.write(order_id + "\\n")
    return {"order": order_id, "status": "shipped"}


def carrier(order_id: str, express: bool = False) -> str:
    """The carrier of an order."""
    return "DHL" if express else "post"
'''

PROTOCOLS = ("anthropic", "gemini", "groq", "ollama")
"""The tool protocols besides OpenAI's own (test_i40_tool_loop.py); Groq speaks OpenAI's."""


def _project(
    root: Path, provider: str, text: str, extra: str = "", model: str | None = None
) -> None:
    workflow = f"""name: support
input: {{path: data/, id_field: id}}
defaults:
  model: {provider}/{model or MODELS[provider]}
  max_tokens: 256
  timeout: 10s
  retry: {{max_attempts: 2, backoff: {{initial: 10ms, max: 50ms}}}}
actions:
  - name: reply
    prompt: "Answer the customer: {{{{ source.text }}}}"
    tools: [tools.orders:lookup, tools.orders:carrier]
{extra}"""
    write_project(
        root,
        workflow,
        agac_yml=project_yml(),
        data={"data/in.jsonl": [{"id": "r0", "text": text}, {"id": "r1", "text": "hello"}]},
        files={"tools/__init__.py": "", "tools/orders.py": TOOLS},
    )


def _calls_log(root: Path) -> list[str]:
    log = root / "tools" / "calls.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def _rows(root: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in api.export_rows("support", "reply", root)}


TWO_TURNS = (
    'where? [[emulator calls: lookup {"order_id": "A1"}]] '
    '[[emulator calls: lookup {"order_id": "A2"} | carrier {"order_id": "A2", "express": true}]]'
)


@pytest.mark.parametrize("provider", PROTOCOLS)
def test_i40_tool_loop_on_each_protocol_runs_the_calls_and_answers_with_their_results(
    emulator: Any, project: Path, monkeypatch: Any, provider: str
) -> None:
    _project(project, provider, TWO_TURNS)
    sent = sent_requests(monkeypatch, provider)

    summary = api.run("support", project).summary

    counts = summary["actions"]["reply"]
    assert summary["state"] == "succeeded" and counts["answered"] == 2, _rows(project)
    # r0: two turns calling tools, then the answer; r1: one call.
    assert counts["calls"] == 4 == chat_requests(emulator.stats(), provider) == len(sent)
    assert _calls_log(project) == ["A1", "A2"]
    rows = _rows(project)
    shipped = json.dumps({"order": "A2", "status": "shipped"}, ensure_ascii=False)
    assert "Tool results: " in rows["r0"]["output"]["text"]
    assert shipped in rows["r0"]["output"]["text"] and '"DHL"' in rows["r0"]["output"]["text"]
    assert (rows["r0"]["turns"], rows["r0"]["tool_calls"]) == (3, 3)
    last = max(sent, key=lambda r: len(r.messages))
    asked = [m for m in last.messages if m.role == "assistant"]
    replies = [m for m in last.messages if m.role == "tool"]
    assert [len(m.tool_calls) for m in asked] == [1, 2]
    assert [m.tool_call_id for m in replies] == [c.id for m in asked for c in m.tool_calls]
    assert json.loads(asked[1].tool_calls[1].arguments) == {"order_id": "A2", "express": True}
    assert [m.name for m in replies] == ["lookup", "lookup", "carrier"]


@pytest.mark.parametrize("provider", PROTOCOLS)
def test_i40_tool_loop_on_each_protocol_holds_a_schema_answer(
    emulator: Any, project: Path, provider: str
) -> None:
    text = (
        'x [[emulator calls: carrier {"order_id": "A1", "express": true}]] '
        '[[emulator answers: {"carrier": {result}}]]'
    )
    schema = """    schema:
      type: object
      properties: {carrier: {type: string}}
      required: [carrier]
      additionalProperties: false
"""
    _project(project, provider, text, extra=schema)

    summary = api.run("support", project).summary

    assert summary["actions"]["reply"]["answered"] == 2
    assert _rows(project)["r0"]["output"] == {"carrier": "DHL"}


@pytest.mark.parametrize("provider", PROTOCOLS)
def test_i40_max_turns_exceeded_on_each_protocol_names_the_last_call(
    emulator: Any, project: Path, provider: str
) -> None:
    _project(project, provider, TWO_TURNS, extra="    max_turns: 2\n")

    summary = api.run("support", project).summary

    assert summary["actions"]["reply"]["reasons"] == {"max_turns_exceeded": 1}
    assert _calls_log(project) == ["A1"]
    # OpenAI's protocol (Groq) gives the arguments as the model's own JSON text, shown as
    # given; the others give an object, shown with its keys sorted.
    shown = (
        '{"order_id": "A2", "express": true}'
        if provider == "groq"
        else '{"express": true, "order_id": "A2"}'
    )
    assert f"carrier({shown})" in _rows(project)["r0"]["detail"]


def test_i40_ollama_tool_loop_waits_out_a_busy_server_and_runs_no_call_twice(
    emulator: Any, project: Path
) -> None:
    """Ollama answers 503 when its queue is full: the turn is asked again, the calls of
    the turns before are not run again."""
    _project(project, "ollama", TWO_TURNS)
    emulator.add_fault(
        {"provider": "ollama", "op": "chat", "fault": {"http": 503}, "nth": 2, "times": 1}
    )

    summary = api.run("support", project).summary

    assert summary["actions"]["reply"]["answered"] == 2, _rows(project)
    assert _calls_log(project) == ["A1", "A2"]
    assert chat_requests(emulator.stats(), "ollama") == 5  # four turns and the one refused


def test_i40_ollama_call_of_a_function_not_offered_is_no_answer(
    emulator: Any, project: Path
) -> None:
    """A model that calls a function the action did not offer: never an answer, never run."""
    _project(project, "ollama", "hello")
    body = {
        "model": MODELS["ollama"],
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "drop_tables", "arguments": {}}}],
        },
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 5,
        "eval_count": 5,
    }
    emulator.add_fault({"provider": "ollama", "op": "chat", "fault": {"reply": {"body": body}}})

    summary = api.run("support", project).summary

    assert summary["actions"]["reply"]["answered"] == 0
    assert set(summary["actions"]["reply"]["reasons"]) == {"unexpected_stop"}
    assert "drop_tables" in _rows(project)["r0"]["detail"]
    assert _calls_log(project) == []


def test_i40_gemini_3_thought_signatures_go_back_unchanged(
    emulator: Any, project: Path, monkeypatch: Any
) -> None:
    """Gemini 3 signs each turn of function calls; the emulator refuses a conversation
    whose turn comes back without its signature, as the API does."""
    _project(project, "gemini", TWO_TURNS, model="gemini-3-flash-preview")
    sent = sent_requests(monkeypatch, "gemini")

    summary = api.run("support", project).summary

    assert summary["actions"]["reply"]["answered"] == 2, _rows(project)
    assert chat_requests(emulator.stats(), "gemini") == 4  # none refused
    last = max(sent, key=lambda r: len(r.messages))
    turns = [m.tool_calls for m in last.messages if m.role == "assistant"]
    assert [[c.signature is not None for c in calls] for calls in turns] == [[True], [True, False]]
    (entry,) = api.record_session("r0", project)["actions"]
    stored = [t["tool_calls"][0]["signature"] for t in entry["turns"] if t["kind"] == "model"]
    assert stored == [calls[0].signature for calls in turns]  # kept with the durable turn
