"""An llm action's ``tools:`` read into :class:`~agac.config.model.FunctionTool` entries.

An entry is ``web_search`` (the provider's own search, config/websearch.py), or
``module:name`` (the function's own name is the tool's), or a mapping with
``function`` and optionally ``name``, ``description``, ``schema`` (the JSON Schema of the
arguments, an object), ``timeout`` and ``effect`` (``true``, or ``{idempotent,
compensate}`` as a tool action's: the function has side effects, E1). Whether each function imports and can be described
is checked against the project (config/environment.py), where the root is known.
"""

from __future__ import annotations

import re
from typing import Any

from agac.config.keys import EFFECT_KEYS, FUNCTION_TOOL_KEYS
from agac.config.model import EffectSpec, FunctionTool
from agac.config.source import Findings, Path
from agac.config.values import read_bool, read_duration, read_mapping, read_str
from agac.config.websearch import is_web_search, read_web_search
from agac.providers.servertools import WebSearch

__all__ = ["read_effect", "read_function", "read_tools"]

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A tool name every provider accepts (OpenAI's and Anthropic's rule; Gemini's is wider)."""


def read_tools(
    f: Findings, value: Any, path: Path
) -> tuple[tuple[FunctionTool, ...], WebSearch | None]:
    """Every entry of ``tools:``, each bad one reported at its own line: the functions,
    and the provider's web search when an entry names it (config/websearch.py)."""
    if not isinstance(value, list) or not value:
        f.error(
            "invalid_value",
            f"tools must be a list of functions (module:name) or web_search, got {value!r}",
            path,
            hint="tools: [tools.orders:lookup]",
        )
        return (), None
    out: list[FunctionTool] = []
    search: WebSearch | None = None
    for n, item in enumerate(value):
        if is_web_search(item):
            if search is not None:
                f.error("invalid_value", "tools lists web_search twice", path + (n,))
            search = read_web_search(f, item, path + (n,))
            continue
        tool = _entry(f, item, path + (n,))
        if tool is None:
            continue
        if any(t.name == tool.name for t in out):
            f.error(
                "invalid_value",
                f"two tools are called {tool.name!r}",
                path + (n,),
                hint="give one of them another name: (name: lookup_order)",
            )
            continue
        out.append(tool)
    return tuple(out), search


def _entry(f: Findings, item: Any, path: Path) -> FunctionTool | None:
    if isinstance(item, str):
        function = read_function(f, item, path)
        return None if function is None else FunctionTool(function, _own_name(function))
    body = read_mapping(f, item, path)
    if body is None:
        return None
    f.unknown_keys(body, FUNCTION_TOOL_KEYS, path, "tool")
    if "function" not in body:
        f.error(
            "missing_key", "a tool has no 'function'", path, hint="function: tools.orders:lookup"
        )
        return None
    function = read_function(f, body["function"], path + ("function",))
    if function is None:
        return None
    name = _own_name(function)
    if "name" in body:
        name = read_str(f, body["name"], path + ("name",)) or name
    if TOOL_NAME.fullmatch(name) is None:
        f.error(
            "invalid_value",
            f"tool name {name!r} is not 1-64 letters, digits, _ or -",
            path + ("name",) if "name" in body else path,
            hint="name: lookup_order",
        )
        return None
    description = None
    if "description" in body:
        description = read_str(f, body["description"], path + ("description",))
    schema = _arguments_schema(f, body["schema"], path + ("schema",)) if "schema" in body else None
    timeout = 60.0
    if "timeout" in body:
        timeout = read_duration(f, body["timeout"], path + ("timeout",)) or timeout
    effect = None
    if "effect" in body:
        effect = read_effect(f, body["effect"], path + ("effect",), flag=True)
    return FunctionTool(function, name, description, schema, timeout, effect)


def read_effect(f: Findings, value: Any, path: Path, *, flag: bool = False) -> EffectSpec | None:
    """An ``effect:`` (E1): ``{idempotent, compensate}``, or with ``flag`` also ``true``
    (an effect that is not idempotent and has no compensation) or ``false`` (none)."""
    if flag and isinstance(value, bool):
        return EffectSpec() if value else None
    body = read_mapping(f, value, path)
    if body is None:
        return None
    f.unknown_keys(body, EFFECT_KEYS, path, "effect")
    idempotent = read_bool(f, body.get("idempotent", False), path + ("idempotent",))
    compensate = None
    if body.get("compensate") is not None:
        compensate = read_function(
            f,
            body["compensate"],
            path + ("compensate",),
            "e.g. compensate: tools.mail:recall_reply (resolved from the project root)",
        )
    return EffectSpec(bool(idempotent), compensate)


def _own_name(function: str) -> str:
    return function.rpartition(":")[2].rpartition(".")[2]


def read_function(
    f: Findings,
    value: Any,
    path: Path,
    hint: str = "e.g. tools.orders:lookup (resolved from the project root)",
) -> str | None:
    """A ``module:name`` reference (a tool's, a tool action's, a compensation's), or None
    with the problem reported; ``hint`` shows the key it is written under."""
    text = read_str(f, value, path)
    if text is None:
        return None
    module, sep, attr = text.partition(":")
    if (
        not sep
        or not module
        or not attr
        or not all(p.isidentifier() for p in (*module.split("."), *attr.split(".")))
    ):
        f.error(
            "invalid_function",
            f"function {text!r} is not module:name",
            path,
            hint=hint,
        )
        return None
    return text


def _arguments_schema(f: Findings, value: Any, path: Path) -> dict[str, Any] | None:
    if not isinstance(value, dict) or value.get("type") != "object":
        f.error(
            "invalid_schema",
            f"a tool's schema must be a JSON Schema of type object (its arguments), got {value!r}",
            path,
            hint="schema: {type: object, properties: {order_id: {type: string}}}",
        )
        return None
    from jsonschema.exceptions import SchemaError  # ~0.1 s: only tools with a schema pay
    from jsonschema.validators import validator_for

    try:
        validator_for(value).check_schema(value)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "schema"
        f.error("invalid_schema", f"the tool's schema is not valid at {where}: {exc.message}", path)
        return None
    return value
