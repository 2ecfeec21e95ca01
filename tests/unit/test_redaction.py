"""Secrets never enter the store: what agac/redaction.py takes out of a text."""

from __future__ import annotations

import pytest

from agac.redaction import REDACTED, Redactor, secret_env_values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-proj-abcdefghijklmnopqrstuv end", "key [redacted] end"),
        ("anthropic sk-ant-api03-abcdefghijklmnopqrstuv", "anthropic [redacted]"),
        ("groq gsk_abcdefghijklmnopqrstuvwxyz", "groq [redacted]"),
        ("google AIzaSyA1234567890abcdefghijklmnopqrstuv", "google [redacted]"),
        ("Authorization: Bearer abcdefghijk123", "Authorization: Bearer [redacted]"),
        ('{"authorization": "Basic dXNlcjpwYXNz"}', '{"authorization": "Basic [redacted]"}'),
        ("x-api-key: abcd1234efgh", "x-api-key: [redacted]"),
        (
            "GET /v1beta/models?key=abcdefgh12345&alt=json",
            "GET /v1beta/models?key=[redacted]&alt=json",
        ),
        ("api_key=hunter2hunter2", "api_key=[redacted]"),
        ("Bearer eyJhbGciOiJIUzI1NiJ9.payload", "Bearer [redacted]"),
    ],
)
def test_known_secret_shapes_are_redacted(text: str, expected: str) -> None:
    assert Redactor()(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "KeyError: 'text'",
        "missing key: id",
        "the task was skipped",
        "record r0001 failed",
        "ValueError: record two is rejected",
        "sk-short",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor()(text) == text


def test_environment_values_of_secret_variables_are_redacted() -> None:
    env = {
        "OPENAI_API_KEY": "plain-value-of-no-shape",
        "MY_SERVICE_TOKEN": "tok-987654321",
        "CUSTOM": "named-by-the-project",
        "HOME": "/root/home-not-a-secret",
        "GROQ_API_KEY": "x",
    }
    values = secret_env_values(["CUSTOM"], env)
    assert set(values) == {"plain-value-of-no-shape", "tok-987654321", "named-by-the-project"}
    redact = Redactor(values)
    text = "got plain-value-of-no-shape, tok-987654321 and named-by-the-project at /root/home-not-a-secret x"
    assert redact(text) == f"got {REDACTED}, {REDACTED} and {REDACTED} at /root/home-not-a-secret x"


def test_longer_secret_wins_over_its_prefix() -> None:
    redact = Redactor(["abcdefgh", "abcdefgh-longer"])
    assert redact("abcdefgh-longer") == REDACTED
