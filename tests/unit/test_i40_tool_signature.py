"""Tools per record: what the model is told about a function tool, from its type hints
and docstring (agac.tools.signature), and one call run (agac.tools.invoke)."""

from __future__ import annotations

import asyncio
import enum
from typing import Literal

import pytest

from agac.config.model import FunctionTool
from agac.providers.base import ToolDef
from agac.tools.invoke import LoadedTool, call_function
from agac.tools.signature import SignatureError, signature_of


class Size(enum.Enum):
    S = "s"
    L = "l"


def lookup(
    order_id: str,
    kind: Literal["a", "b"],
    size: Size,
    tags: list[str],
    weights: dict[str, float] | None = None,
    ctx: object = None,
) -> dict[str, str]:
    """Find an order
    in the shop.

    More text.

    Args:
        order_id: the order's id,
            as written.
        tags (list): labels.

    Returns:
        the order.
    """
    return {"order": order_id}


def test_i40_signature_from_type_hints_and_docstring() -> None:
    found = signature_of(lookup, "lookup")
    assert found.description == "Find an order in the shop."
    assert found.takes_context
    assert found.parameters == {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "description": "the order's id, as written."},
            "kind": {"enum": ["a", "b"]},
            "size": {"enum": ["s", "l"]},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "labels."},
            "weights": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "required": ["order_id", "kind", "size", "tags"],
        "additionalProperties": False,
    }


def test_i40_signature_rest_params_and_errors() -> None:
    def rest(a: int, b: bool = True) -> None:
        """Do.

        :param a: the a.
        :param bool b: the b.
        """

    found = signature_of(rest, "rest")
    assert found.parameters["properties"]["a"] == {"type": "integer", "description": "the a."}
    assert found.parameters["properties"]["b"] == {"type": "boolean", "description": "the b."}

    def star(*args: int) -> None: ...

    def keys(m: dict[int, str]) -> None: ...

    def obj(m: object) -> None: ...

    for fn in (star, keys, obj):
        with pytest.raises(SignatureError):
            signature_of(fn, fn.__name__)


def _loaded(fn: object, timeout: float = 5.0) -> LoadedTool:
    found = signature_of(fn, "t")  # type: ignore[arg-type]
    spec = FunctionTool("m:f", "t", timeout=timeout)
    return LoadedTool(spec, fn, ToolDef("t", "", found.parameters), found.takes_context, "")  # type: ignore[arg-type]


def test_i40_call_function_checks_arguments_and_keeps_errors_for_the_model() -> None:
    def add(a: int, b: int = 1, ctx: object = None) -> dict[str, object]:
        print("to stderr, not agac's stdout")
        return {"sum": a + b, "ctx": ctx}

    def boom(a: int) -> int:
        raise KeyError("nope")

    tool = _loaded(add)
    ok = asyncio.run(call_function(tool, '{"a": 2}', "the-context"))
    assert (ok.output, ok.error) == ('{"sum": 3, "ctx": "the-context"}', None)
    bad = asyncio.run(call_function(tool, '{"a": "x"}', None))
    assert bad.output is None and "do not match the tool's schema" in str(bad.error)
    assert '"error"' in bad.content
    assert "not JSON" in str(asyncio.run(call_function(tool, "{a", None)).error)
    raised = asyncio.run(call_function(_loaded(boom), '{"a": 1}', None))
    assert raised.error == "KeyError: 'nope'"


def test_i40_call_function_times_out() -> None:
    async def slow(a: int) -> int:
        await asyncio.Event().wait()  # never set: only the timeout ends it
        return a

    timed = asyncio.run(call_function(_loaded(slow, timeout=0.05), '{"a": 1}', None))
    assert timed.error == "the tool did not return within 0.05 seconds"
