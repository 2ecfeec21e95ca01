"""A tool's value and a model's answer are strict JSON or the unit fails (issue 29 items
12 and 13): NaN, ±Infinity and lone surrogates never reach the store."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from agac.engine.actions import SchemaValidator
from agac.engine.requests import Fail, accept_response, tool_output
from agac.providers.base import Response


def _runtime(schema: Any = None) -> Any:
    return SimpleNamespace(
        validator=SchemaValidator(schema) if schema is not None else None,
        action=SimpleNamespace(max_tokens=100),
    )


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"score": float("nan")}, "NaN at score"),
        ({"x": [float("inf")]}, "Infinity at x[0]"),
        (-float("inf"), "returned -Infinity,"),
    ],
)
def test_i29_12_tool_non_finite_number_is_tool_error_naming_the_field(
    value: Any, said: str
) -> None:
    with pytest.raises(Fail) as caught:
        tool_output(_runtime(), value)

    assert caught.value.reason == "tool_error" and not caught.value.retry
    assert said in caught.value.detail
    assert "null or a finite number" in caught.value.detail


def test_i29_13_tool_lone_surrogate_is_tool_error_naming_the_field() -> None:
    with pytest.raises(Fail) as caught:
        tool_output(_runtime(), {"items": [{"name": "a\udc80"}]})

    assert caught.value.reason == "tool_error"
    assert "a lone surrogate (\\udc80) at items[0].name" in caught.value.detail
    caught.value.detail.encode("utf-8")


def test_i29_12_tool_strict_value_passes_through() -> None:
    assert tool_output(_runtime(), {"s": "é \U0001f600", "n": 1.5}) == {
        "s": "é \U0001f600",
        "n": 1.5,
    }


def test_i29_12_model_answer_with_nan_is_reasked() -> None:
    """``json.loads`` reads ``NaN``; the answer is not JSON and is asked again."""
    rt = _runtime({"type": "object", "properties": {"score": {"type": "number"}}})

    with pytest.raises(Fail) as caught:
        accept_response(rt, Response(text='{"score": NaN}', model="m"))

    assert caught.value.reason == "schema_invalid" and caught.value.retry
    assert "NaN at score" in caught.value.detail
    assert caught.value.feedback is not None and "strict JSON" in caught.value.feedback
