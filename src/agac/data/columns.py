"""Column types of the wide results table, independent of any data library (docs/python.md).

A column's type is one of:

- :class:`Scalar` — ``string``, ``int64``, ``float64``, ``bool``, or ``json`` (any JSON
  value, written as JSON text);
- :class:`ListOf` — an array of one element type;
- :class:`StructOf` — an object with known fields (only inside lists: objects at the top
  of an output are flattened into columns instead, ``classify.meta.score``).

Action outputs are typed from the action's JSON Schema (:func:`type_of_schema`); source
fields, which have no schema, from the values themselves (:class:`Sketch`). A value is
turned into its column's Python representation by :func:`coerce`, which never loses a
value silently: a value that does not fit its type is written as JSON text when the
type is ``string`` or ``json``, and raises ``TypeError`` naming it otherwise.

The Arrow mapping lives in :mod:`agac.data.arrow`; JSONL and CSV writers use these
types directly, so they need no optional dependency.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agac.jsontext import strict_dumps

__all__ = [
    "JSON",
    "ColumnType",
    "ListOf",
    "Scalar",
    "Sketch",
    "StructOf",
    "coerce",
    "flatten_object",
    "json_text",
    "type_of_schema",
]

ScalarName = Literal["string", "int64", "float64", "bool", "json"]


@dataclass(frozen=True)
class Scalar:
    name: ScalarName


@dataclass(frozen=True)
class ListOf:
    item: ColumnType


@dataclass(frozen=True)
class StructOf:
    fields: tuple[tuple[str, ColumnType], ...]


ColumnType = Scalar | ListOf | StructOf

JSON = Scalar("json")
STRING = Scalar("string")
_PRIMITIVES: dict[str, ScalarName] = {
    "string": "string",
    "integer": "int64",
    "number": "float64",
    "boolean": "bool",
}


def json_text(value: Any) -> str:
    """Compact strict JSON text, non-ASCII kept as is (NotJSON for a NaN or an infinity)."""
    return strict_dumps(value, separators=(",", ":"))


# -- from a JSON Schema ----------------------------------------------------------------------


def type_of_schema(schema: Any) -> ColumnType:
    """The column type of values satisfying ``schema``; ``json`` when it does not say one
    type (no ``type``, a union of several, ``anyOf``/``$ref``, an object without
    ``properties``)."""
    if not isinstance(schema, Mapping):
        return JSON
    kind = _single_type(schema)
    if kind in _PRIMITIVES:
        return Scalar(_PRIMITIVES[kind])
    if kind == "array":
        return ListOf(type_of_schema(schema.get("items")))
    if kind == "object" and isinstance(schema.get("properties"), Mapping) and schema["properties"]:
        return StructOf(tuple((str(k), type_of_schema(v)) for k, v in schema["properties"].items()))
    return JSON


def _single_type(schema: Mapping[str, Any]) -> str | None:
    """The one non-null JSON type ``schema`` allows, from ``type``, else ``enum``/``const``."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    elif kind is None and isinstance(schema.get("enum"), list):
        kind = _kind_of_values(schema["enum"])
    elif kind is None and "const" in schema:
        kind = _kind_of_values([schema["const"]])
    return kind if isinstance(kind, str) else None


def _kind_of_values(values: list[Any]) -> str | None:
    kinds = {_json_kind(v) for v in values if v is not None}
    if kinds == {"integer", "number"}:
        return "number"
    return kinds.pop() if len(kinds) == 1 else None


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def flatten_object(prefix: str, kind: ColumnType) -> list[tuple[str, tuple[str, ...], ColumnType]]:
    """The columns of an object at the top of an output: (name, path, type), nested
    objects flattened with dots (``meta.score``); anything else is one column."""
    if not isinstance(kind, StructOf):
        return [(prefix, (), kind)]
    out = []
    for name, sub in kind.fields:
        for column, path, leaf in flatten_object(f"{prefix}.{name}", sub):
            out.append((column, (name, *path), leaf))
    return out


# -- values ---------------------------------------------------------------------------------


def coerce(value: Any, kind: ColumnType, *, json_as_text: bool = True) -> Any:
    """``value`` as its column holds it: JSON text for ``json`` (the value itself when not
    ``json_as_text``), a list for a list, a dict of the known fields for a struct, None
    for a missing value. TypeError when it does not fit."""
    if value is None:
        return None
    if isinstance(kind, Scalar):
        if kind.name == "json" and not json_as_text:
            return value
        return _scalar(value, kind.name)
    if isinstance(kind, ListOf):
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {json_text(value)[:80]}")
        return [coerce(v, kind.item, json_as_text=json_as_text) for v in value]
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object, got {json_text(value)[:80]}")
    return {
        name: coerce(value.get(name), sub, json_as_text=json_as_text) for name, sub in kind.fields
    }


def _scalar(value: Any, name: ScalarName) -> Any:
    if name == "json":
        return json_text(value)
    if name == "string":
        return value if isinstance(value, str) else json_text(value)
    if name == "bool" and isinstance(value, bool):
        return value
    if (
        name == "int64"
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and float(value).is_integer()
    ):
        return int(value)
    if name == "float64" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"expected {name}, got {json_text(value)[:80]}")


# -- types of values without a schema (source fields) -------------------------------------


MAX_FIELDS = 256
"""An object seen with more distinct fields than this is a map, not a record: JSON text."""


@dataclass
class Sketch:
    """What the values seen at one place were: their JSON kinds, the fields of objects and
    the elements of arrays. :meth:`add` every value, then :meth:`column_type`.

    The resulting type holds every value seen: integers with floats make ``float64``;
    objects make a struct of every field seen (or ``json`` past :data:`MAX_FIELDS`);
    anything mixed is ``json``. Memory grows with the distinct field paths only."""

    kinds: set[str] = field(default_factory=set)
    fields: dict[str, Sketch] = field(default_factory=dict)
    items: Sketch | None = None
    overflow: bool = False

    def add(self, value: Any) -> None:
        kind = _json_kind(value)
        self.kinds.add(kind)
        if kind == "object" and not self.overflow:
            for key, item in value.items():
                sub = self.fields.get(str(key))
                if sub is None:
                    if len(self.fields) >= MAX_FIELDS:
                        self.overflow, self.fields = True, {}
                        break
                    sub = self.fields[str(key)] = Sketch()
                sub.add(item)
        elif kind == "array":
            if self.items is None:
                self.items = Sketch()
            for item in value:
                self.items.add(item)

    def column_type(self) -> ColumnType:
        kinds = self.kinds - {"null"}
        if kinds == {"integer", "number"}:
            kinds = {"number"}
        if len(kinds) != 1:
            return STRING if not kinds else JSON
        kind = kinds.pop()
        if kind in _PRIMITIVES:
            return Scalar(_PRIMITIVES[kind])
        if kind == "array":
            return ListOf(self.items.column_type() if self.items is not None else STRING)
        if self.overflow or not self.fields:
            return JSON
        return StructOf(tuple((k, s.column_type()) for k, s in self.fields.items()))
