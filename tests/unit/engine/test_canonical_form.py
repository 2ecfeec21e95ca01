"""An action's CanonicalForm gives exactly Request.canonical(): the bytes a fingerprint
hashes, so answers stored before and after it are found alike."""

from __future__ import annotations

import random

from agac.engine.canonical import CanonicalForm
from agac.providers.base import Message, Request

TEXTS = ["plain", 'quote " and \\ back', "ünïcødé ✓ 中文", "tab\tnew\nline", "\u2028\x00\x1f", ""]
SCHEMAS = [
    None,
    {
        "type": "object",
        "properties": {"b": {"enum": ["x", "y"]}, "a": {"type": "integer"}},
        "required": ["b"],
    },
]


def test_canonical_form_matches_request_canonical() -> None:
    rng = random.Random(7)
    for _ in range(500):
        schema = rng.choice(SCHEMAS)
        temperature = rng.choice([None, 0.0, 0.7, 1e-05])
        max_tokens = rng.choice([1, 64, 1024])
        form = CanonicalForm("openai", "gpt-4o-mini", max_tokens, temperature, schema)
        messages = tuple(
            Message(
                rng.choice(["system", "user", "assistant"]), rng.choice(TEXTS) * rng.randint(1, 3)
            )
            for _ in range(rng.randint(1, 3))
        )
        request = Request(
            provider="openai",
            model="gpt-4o-mini",
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            schema=schema,
            seed=rng.choice([None, 0, 3]),
        )
        assert form.of(request) == request.canonical()


def test_a_request_that_differs_in_a_shared_part_is_encoded_whole() -> None:
    form = CanonicalForm("openai", "gpt-4o-mini", 64, None, None)
    revised = Request(
        provider="openai",
        model="gpt-4o-mini",
        messages=(Message("user", "hi"),),
        max_tokens=128,
        temperature=0.5,
        schema=None,
    )
    assert form.of(revised) == revised.canonical()
