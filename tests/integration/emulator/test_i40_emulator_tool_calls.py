"""Tools per record: the emulator asks for the tools a prompt scripts
(``[[emulator calls: NAME {args}]]``) on OpenAI's ``tool_calls`` protocol, through the
official SDK, and answers with the results once they are sent back."""

from __future__ import annotations

import json
from typing import Any

import openai

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
