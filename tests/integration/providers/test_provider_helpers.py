"""The adapters' shared helpers, without a server: retry hints, the classification
table, strict-schema detection and answer parsing."""

from __future__ import annotations

import email.utils
import time

import pytest

from agac.errors import FatalError, RetryableError, WaitError
from agac.providers._common import parse_json, strict_compatible
from agac.providers._errors import classify, error_fields, retry_after_seconds


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_seconds(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers) == expected


def test_retry_after_as_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert retry_after_seconds({"retry-after": when}) == pytest.approx(30, abs=2)


@pytest.mark.parametrize(
    ("status", "kwargs", "expected"),
    [
        (429, {"retry_after": 3.0}, WaitError),
        (529, {"retry_after": 3.0}, WaitError),
        (429, {}, RetryableError),
        (529, {}, RetryableError),
        (429, {"code": "insufficient_quota", "retry_after": 3.0}, FatalError),
        (429, {"quota": True}, FatalError),
        (503, {"retry_after": 3.0}, RetryableError),
        (500, {}, RetryableError),
        (408, {}, RetryableError),
        (409, {}, RetryableError),
        (None, {}, RetryableError),
        (400, {}, FatalError),
        (401, {}, FatalError),
        (403, {}, FatalError),
        (404, {}, FatalError),
        (422, {}, FatalError),
    ],
)
def test_classify(status: int | None, kwargs: dict, expected: type) -> None:
    error = classify("openai", status, **kwargs)
    assert type(error) is expected
    assert error.status == status


def test_error_fields_reads_wrapped_and_bare_bodies() -> None:
    bare = {"message": "no", "type": "insufficient_quota", "code": "insufficient_quota"}
    assert error_fields(bare) == ("insufficient_quota", "insufficient_quota", "no", None)
    assert error_fields({"error": bare}) == error_fields(bare)
    assert error_fields("plain text") == (None, None, "plain text", None)
    # OpenAI's code may be an integer or null, and param may be set.
    numeric = {"message": "slow down", "type": "requests", "code": 429, "param": "model"}
    assert error_fields({"error": numeric}) == ("429", "requests", "slow down", "model")


def test_strict_compatible() -> None:
    strict = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert strict_compatible(strict)
    assert not strict_compatible({**strict, "required": []})
    assert not strict_compatible({k: v for k, v in strict.items() if k != "additionalProperties"})
    nested = {
        **strict,
        "properties": {"a": {"type": "array", "items": {"type": "object", "properties": {}}}},
    }
    assert not strict_compatible(nested)
    assert strict_compatible({"type": "string"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [('{"a": 1}', {"a": 1}), ('```json\n{"a": 1}\n```', {"a": 1}), ("{oops", None), ("", None)],
)
def test_parse_json(text: str, expected: object) -> None:
    assert parse_json(text) == expected
