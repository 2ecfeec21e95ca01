"""Tools per record: the emulator asks for the tools a prompt scripts
(``[[emulator calls: NAME {args}]]``) on OpenAI's ``tool_calls`` protocol, through the
official SDK, and answers with the results once they are sent back."""

from __future__ import annotations

import json
from typing import Any

import ollama
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors

from agac.emulator.testing import RunningEmulator

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find an order.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]
PROMPT = (
    'Where is my order? [[emulator calls: lookup {"order_id": "A1"}]] '
    "[[emulator answers: The order is {result}.]]"
)


def test_i40_emulator_asks_for_the_scripted_call_then_answers_with_its_result(
    oai: openai.OpenAI,
) -> None:
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    first = oai.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"order_id": "A1"}
    assert first.usage is not None and first.usage.completion_tokens > 0
    again = oai.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    assert (again.choices[0].message.tool_calls or [])[0].id == call.id  # deterministic

    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": "lookup", "arguments": call.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": '"shipped"'},
    ]
    final = oai.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == 'The order is "shipped".'


def test_i40_emulator_ignores_a_directive_for_a_tool_not_offered(oai: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    plain = oai.chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert plain.choices[0].finish_reason == "stop"
    assert plain.choices[0].message.tool_calls is None


OLLAMA_TOOLS: list[Any] = [TOOLS[0]]


def test_i40_emulator_ollama_asks_with_argument_objects_then_answers_with_the_results(
    oll: ollama.Client,
) -> None:
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    first = oll.chat(model="llama3.2", messages=messages, tools=OLLAMA_TOOLS)
    assert first.done_reason == "stop" and not first.message.content
    (call,) = first.message.tool_calls or []
    assert call.function.name == "lookup"
    assert call.function.arguments == {"order_id": "A1"}  # an object, not JSON text
    assert (first.eval_count or 0) > 0

    messages += [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": '"shipped"', "tool_name": "lookup"},
    ]
    final = oll.chat(model="llama3.2", messages=messages, tools=OLLAMA_TOOLS)
    assert final.done_reason == "stop" and not final.message.tool_calls
    assert final.message.content == 'The order is "shipped".'


def test_i40_emulator_ollama_streams_the_calls_in_a_chunk_before_done(
    oll: ollama.Client,
) -> None:
    chunks = list(
        oll.chat(
            model="llama3.2",
            messages=[{"role": "user", "content": PROMPT}],
            tools=OLLAMA_TOOLS,
            stream=True,
        )
    )
    called = [c for c in chunks if c.message.tool_calls]
    assert len(called) == 1 and not called[0].done
    assert called[0].message.tool_calls[0].function.arguments == {"order_id": "A1"}
    assert chunks[-1].done and chunks[-1].done_reason == "stop"
    assert not chunks[-1].message.tool_calls


def test_i40_emulator_ollama_tool_turn_takes_faults(
    emu: RunningEmulator, oll: ollama.Client
) -> None:
    """A busy server (503) on a tool turn, then a turn cut at ``length``: the calls still
    come as asked, the stop as the fault says."""
    emu.add_fault({"provider": "ollama", "op": "chat", "fault": {"http": 503}, "times": 1})
    user = [{"role": "user", "content": PROMPT}]
    with pytest.raises(ollama.ResponseError) as caught:
        oll.chat(model="llama3.2", messages=user, tools=OLLAMA_TOOLS)
    assert caught.value.status_code == 503
    emu.add_fault(
        {"provider": "ollama", "op": "chat", "fault": {"reply": {"stop": "length"}}, "times": 1}
    )
    cut = oll.chat(model="llama3.2", messages=user, tools=OLLAMA_TOOLS)
    assert cut.done_reason == "length"
    assert (cut.message.tool_calls or [])[0].function.name == "lookup"


def test_i40_emulator_gemini_3_signs_calls_and_refuses_a_turn_without_its_signature(
    gem: genai.Client,
) -> None:
    tools: Any = [
        {
            "function_declarations": [
                {
                    "name": "lookup",
                    "description": "Find an order.",
                    "parameters_json_schema": {
                        "type": "object",
                        "properties": {"order_id": {"type": "string"}},
                    },
                }
            ]
        }
    ]
    config: Any = {"tools": tools}
    user: Any = {"role": "user", "parts": [{"text": PROMPT}]}
    first = gem.models.generate_content(
        model="gemini-3-flash-preview", contents=[user], config=config
    )
    (part,) = first.candidates[0].content.parts  # type: ignore[index, union-attr]
    assert part.function_call is not None and part.thought_signature
    old = gem.models.generate_content(model="gemini-2.5-flash", contents=[user], config=config)
    assert old.candidates[0].content.parts[0].thought_signature is None  # type: ignore[index, union-attr]

    reply: Any = {
        "role": "user",
        "parts": [{"function_response": {"name": "lookup", "response": {"result": '"shipped"'}}}],
    }
    signed: Any = {"role": "model", "parts": [part]}
    final = gem.models.generate_content(
        model="gemini-3-flash-preview", contents=[user, signed, reply], config=config
    )
    assert final.text == 'The order is "shipped".'

    bare: Any = {"role": "model", "parts": [{"function_call": part.function_call}]}
    with pytest.raises(genai_errors.ClientError) as refused:
        gem.models.generate_content(
            model="gemini-3-flash-preview", contents=[user, bare, reply], config=config
        )
    assert refused.value.code == 400
    assert "missing a thought_signature" in str(refused.value) and "position 2" in str(
        refused.value
    )
