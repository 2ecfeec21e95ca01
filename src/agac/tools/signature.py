"""What the model is told about a function tool, from the function itself.

The JSON Schema of its arguments comes from the type hints of its parameters; each
parameter's description from the docstring (a Google-style ``Args:`` section, or
``:param name: text`` lines); the tool's description from the docstring's first
paragraph. A parameter without a default is required. A parameter named ``ctx`` is not
an argument: agac passes the call's :class:`~agac.engine.context.ToolContext` there.

Types: ``str``, ``int``, ``float``, ``bool``, ``None``, ``list[T]``/``tuple[T, ...]``,
``dict[str, T]``, ``Literal[...]``, an ``Enum`` of strings or numbers, ``T | None`` and
``Optional[T]``. Anything else is a :class:`SignatureError` that names the parameter and
says to give ``schema:`` instead.
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CONTEXT_PARAMETER", "SignatureError", "ToolSignature", "signature_of"]

CONTEXT_PARAMETER = "ctx"
"""The parameter that receives the call's ToolContext rather than an argument."""


class SignatureError(Exception):
    """A function tool whose arguments cannot be described; the message says which."""


@dataclass(frozen=True)
class ToolSignature:
    """A function as the model sees it: its description and its arguments' schema;
    ``takes_context``: it has a ``ctx`` parameter."""

    description: str
    parameters: dict[str, Any]
    takes_context: bool


def signature_of(fn: Callable[..., Any], label: str) -> ToolSignature:
    """The description and argument schema of ``fn`` (``label`` names it in errors)."""
    target = inspect.unwrap(fn)
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError) as exc:
        raise SignatureError(f"{label}: its signature cannot be read ({exc})") from exc
    try:
        hints = typing.get_type_hints(target)
    except Exception as exc:  # a hint naming something not importable
        raise SignatureError(f"{label}: its type hints cannot be resolved ({exc})") from exc
    doc = inspect.getdoc(target) or ""
    notes = _argument_notes(doc)
    properties: dict[str, Any] = {}
    required: list[str] = []
    takes_context = False
    for name, param in sig.parameters.items():
        if name == CONTEXT_PARAMETER:
            takes_context = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise SignatureError(
                f"{label}: parameter {param}: a tool's arguments are named, one by one"
            )
        if name not in hints:
            raise SignatureError(f"{label}: parameter {name!r} has no type hint")
        prop = _schema_of(hints[name], f"{label}: parameter {name!r}")
        if name in notes:
            prop = {**prop, "description": notes[name]}
        properties[name] = prop
        if param.default is inspect.Parameter.empty:
            required.append(name)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return ToolSignature(_first_paragraph(doc), schema, takes_context)


_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _schema_of(hint: Any, where: str) -> dict[str, Any]:
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        if len(kept) == 1:
            return _schema_of(kept[0], where)  # Optional[T]: T, not required by its default
        return {"anyOf": [_schema_of(a, where) for a in args]}
    if hint is list or origin is list or (origin is tuple and args[1:] == (Ellipsis,)):
        return {"type": "array", "items": _schema_of(args[0], where)} if args else {"type": "array"}
    if hint is dict or origin is dict:
        if args and args[0] is not str:
            raise SignatureError(f"{where}: JSON object keys are strings, not {args[0]!r}")
        return (
            {"type": "object", "additionalProperties": _schema_of(args[1], where)}
            if args
            else {"type": "object"}
        )
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    raise SignatureError(
        f"{where}: type {hint!r} has no JSON Schema agac can work out; "
        "give the tool's arguments as schema: in the workflow"
    )


def _first_paragraph(doc: str) -> str:
    head = doc.strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in head.splitlines())


_SECTION = re.compile(r"^(Args|Arguments|Parameters):\s*$")
_ENTRY = re.compile(r"^\s+(\w+)(?:\s*\([^)]*\))?\s*:\s*(.*)$")
_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$")


def _argument_notes(doc: str) -> dict[str, str]:
    """Each argument's description: a Google-style ``Args:`` section's ``name: text``
    entries (continuation lines joined), or reST ``:param name: text`` lines."""
    notes: dict[str, str] = {}
    inside, last = False, None
    for line in doc.splitlines():
        found = _PARAM.match(line.strip())
        if found is not None:
            notes[found.group(1)] = found.group(2).strip()
            continue
        if _SECTION.match(line.strip()):
            inside, last = True, None
            continue
        if not inside:
            continue
        if line.strip() and not line.startswith((" ", "\t")):
            inside = False  # the next section
            continue
        entry = _ENTRY.match(line)
        if entry is not None and len(line) - len(line.lstrip()) <= 4:
            last = entry.group(1)
            notes[last] = entry.group(2).strip()
        elif last is not None and line.strip():
            notes[last] = f"{notes[last]} {line.strip()}"
    return notes
