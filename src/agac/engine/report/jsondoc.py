"""The run report's JSON, made in one place: :func:`to_json` turns any value of the report
tree into the JSON document ``--json`` prints and the HTTP API sends.

A report value is a frozen dataclass; its JSON object has its fields' names as keys in
the order they are declared, so renaming a field renames its key and reordering fields
reorders the document (tests pin both). A field may be left out of the document when it
does not apply (its metadata :data:`ABSENT_WHEN_NONE`, :data:`ABSENT_WHEN_EMPTY`, or its
value :data:`ABSENT` where None is written as ``null``), or have its own
object's keys merged into its parent's (:data:`INLINED`: ``agac status`` is the run's
summary plus what the status read adds). Tuples become arrays; mappings objects.

Values also read as their JSON (:class:`JSONView`), so a notebook's
``result.summary["actions"]["classify"]["answered"]`` keeps working; code inside agac
reads attributes, which mypy checks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "ABSENT",
    "ABSENT_WHEN_EMPTY",
    "ABSENT_WHEN_NONE",
    "INLINED",
    "Absent",
    "JSONView",
    "document",
    "to_json",
]


class Absent(Enum):
    """A field's value that leaves its key out of the JSON (where None is ``null``)."""

    ABSENT = "<absent>"


ABSENT: Literal[Absent.ABSENT] = Absent.ABSENT

_ABSENT = "absent"
_INLINE = "inline"


ABSENT_WHEN_NONE: Mapping[str, str] = MappingProxyType({_ABSENT: "none"})
"""A field's metadata: its key is left out of the JSON while its value is None."""

ABSENT_WHEN_EMPTY: Mapping[str, str] = MappingProxyType({_ABSENT: "empty"})
"""A field's metadata: its key is left out while its value is empty (a tuple, a mapping)."""

INLINED: Mapping[str, bool] = MappingProxyType({_INLINE: True})
"""A field's metadata: its value's JSON object is merged into its parent's, at its place."""


def to_json(value: object) -> Any:
    """``value``'s JSON data: report dataclasses by their fields, mappings and sequences
    element by element, anything else as it is."""
    if is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in fields(value):
            item = getattr(value, f.name)  # a declared field, read by its name
            absent = f.metadata.get(_ABSENT)
            if (
                item is ABSENT
                or (absent == "none" and item is None)
                or (absent == "empty" and not item)
            ):
                continue
            if f.metadata.get(_INLINE):
                out.update(to_json(item))
            else:
                out[f.name] = to_json(item)
        return out
    if isinstance(value, Mapping):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return [to_json(item) for item in value]
    return value


def document(value: object) -> Any:
    """A command's or request's JSON document: a report value's JSON (:func:`to_json`),
    any other value (plain JSON data already) as it is."""
    return to_json(value) if isinstance(value, JSONView) else value


class JSONView(Mapping[str, Any]):
    """A report value that also reads as its JSON object (the library's notebook view)."""

    def to_dict(self) -> dict[str, Any]:
        """This value's JSON document (:func:`to_json`)."""
        doc: dict[str, Any] = to_json(self)
        return doc

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())
