"""The OpenAI-style batch input lines written with the shared tail (limits and schema
encoded once per run of requests that share them) are byte for byte the lines of the
general path, ``dump_line(_batch_line(request))``, whatever changes between requests;
the lines written straight from stored canonical requests are the same JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agac.providers._common import dump_line
from agac.providers.base import Message, ProviderSettings, Request, stored_request
from agac.providers.groq import GroqProvider
from agac.providers.openai import OpenAIProvider

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"enum": ["a", "b", "é"]}, "n": {"type": "integer"}},
    "required": ["label", "n"],
    "additionalProperties": False,
}
LOOSE: dict[str, Any] = {"type": "object", "properties": {"x": {"const": True}}}
LOOSE_INT: dict[str, Any] = {"type": "object", "properties": {"x": {"const": 1}}}


def request(
    i: int,
    *,
    model: str = "gpt-4o-mini",
    schema: Any = SCHEMA,
    temperature: Any = None,
    seed: int | None = None,
    max_tokens: int = 64,
    system: bool = True,
) -> Request:
    messages = ((Message("system", 'You label "things" — carefully.'),) if system else ()) + (
        Message("user", f"Record {i}: naïve café\n\ttab, 雪 and \\ backslash"),
    )
    return Request(
        provider="openai",
        model=model,
        messages=messages,
        max_tokens=max_tokens,
        temperature=temperature,
        schema=schema,
        seed=seed,
        custom_id=f"r{i}a1",
    )


REQUESTS = [
    *(request(i) for i in range(3)),
    request(3, schema=dict(SCHEMA)),  # an equal schema in another object
    request(4, schema=None),
    request(5, temperature=1),
    request(6, temperature=1.0),  # equal in Python, not in JSON
    request(7, schema=LOOSE),
    request(8, schema=LOOSE_INT),  # True == 1 in Python, not in JSON
    request(9, seed=3),
    request(10, max_tokens=128, system=False),
    request(11, model="gpt-4.1"),
    request(12),
    request(13, schema=None, temperature=0.5),
]
#: Message text that looks like the canonical form's own punctuation.
TRICKY = Request(
    provider="openai",
    model="gpt-4o-mini",
    max_tokens=64,
    schema=SCHEMA,
    messages=(Message("user", 'say ],"model":"x" and "messages":[ too'),),
    custom_id="tricky",
)


@pytest.mark.parametrize("cls", [OpenAIProvider, GroqProvider])
def test_batch_lines_are_the_general_paths_lines(cls: Any) -> None:
    provider = cls(ProviderSettings(name=cls.name, api_key="x", base_url="http://127.0.0.1:9"))
    assert list(provider._batch_lines(REQUESTS)) == [
        dump_line(provider._batch_line(r)) for r in REQUESTS
    ]


def test_batch_lines_in_json_mode_take_the_general_path() -> None:
    provider = OpenAIProvider(
        ProviderSettings(name="openai", api_key="x", base_url="http://127.0.0.1:9")
    )
    provider._no_schema.add("gpt-4o-mini")  # a model that refused json_schema before
    lines = list(provider._batch_lines(REQUESTS))
    assert lines == [dump_line(provider._batch_line(r)) for r in REQUESTS]
    assert b'"json_object"' in lines[0] and b'"json_schema"' in lines[11]


@pytest.mark.parametrize("json_mode", [False, True])
@pytest.mark.parametrize("cls", [OpenAIProvider, GroqProvider])
def test_lines_from_stored_requests_are_the_same_json(cls: Any, json_mode: bool) -> None:
    provider = cls(ProviderSettings(name=cls.name, api_key="x", base_url="http://127.0.0.1:9"))
    if json_mode:
        provider._no_schema.add("gpt-4o-mini")
    requests = [*REQUESTS, TRICKY, *REQUESTS[:2]]
    stored = [(r.custom_id, r.canonical()) for r in requests]
    lines = list(provider._stored_lines(stored))
    # what submission sent before: each stored request decoded back into a Request
    decoded = [stored_request(text, cid) for cid, text in stored]
    assert [json.loads(x) for x in lines] == [json.loads(x) for x in provider._batch_lines(decoded)]
    assert all(b"\n" not in x for x in lines)


def test_text_not_in_the_canonical_form_is_decoded() -> None:
    provider = OpenAIProvider(
        ProviderSettings(name="openai", api_key="x", base_url="http://127.0.0.1:9")
    )
    loose = json.dumps(REQUESTS[0].to_dict(), indent=1)  # not the canonical form: decoded
    assert [json.loads(x) for x in provider._stored_lines([("r0a1", loose)])] == [
        json.loads(dump_line(provider._batch_line(stored_request(loose, "r0a1"))))
    ]
