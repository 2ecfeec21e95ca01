"""One record of an input and how records are made: shared by the row readers
(:mod:`agac.data.readers`) and the columnar one (:mod:`agac.data.columnar`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agac.data.files import InputChanged

__all__ = [
    "DUPLICATE_KEY",
    "INPUT_CHANGED",
    "INVALID_INPUT",
    "InputRecord",
    "changed_record",
    "invalid_record",
    "key_of",
    "record_of",
]

INVALID_INPUT = "invalid_input"
DUPLICATE_KEY = "duplicate_key"
INPUT_CHANGED = "input_changed"


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One record of an input file.

    ``file`` is the file's name, ``n`` the record's 1-based position (JSONL line, CSV
    data row, JSON array element) and ``line`` the physical line where it starts (0
    when unknown, as inside JSON arrays). ``payload`` is the record's object, or None
    when it is invalid; then ``error`` says why, naming file and line, and ``reason``
    is ``invalid_input`` or ``duplicate_key`` (a duplicate keeps its payload, so its
    session can show it). Check :attr:`ok` (or ``reason``), not ``payload``.
    """

    file: str
    n: int
    line: int
    key: str
    payload: dict[str, Any] | None
    error: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """True when the record can be worked on."""
        return self.reason is None


def record_of(
    file: str, n: int, line: int, payload: Any, id_field: str | None, unit: str = "element"
) -> InputRecord:
    """Build the record for one parsed value, checking it is an object with a key.
    ``unit`` is what a message calls a record without a line (``element``, ``row``)."""
    if not isinstance(payload, dict):
        where = f"{file}:{line}" if line else f"{file} {unit} {n}"
        kind = _json_kind(payload)
        return invalid_record(file, n, line, f"{where}: a record must be a JSON object, not {kind}")
    if id_field is None:
        return InputRecord(file, n, line, f"{file}:{n}", payload)
    key = key_of(payload.get(id_field))
    if key is None:
        where = f"{file}:{line}" if line else f"{file} {unit} {n}"
        positional = f"{file}:{n}"
        message = f"{where}: id_field {id_field!r} is missing or empty"
        if id_field in payload and payload[id_field] not in (None, ""):
            message = f"{where}: id_field {id_field!r} must be a string or a number"
        return InputRecord(file, n, line, positional, None, message, INVALID_INPUT)
    return InputRecord(file, n, line, key, payload)


def key_of(value: Any) -> str | None:
    """The record key for an ``id_field`` value, or None when it cannot be one."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value or None
    if isinstance(value, int | float):
        return str(value)
    return None


def invalid_record(
    file: str, n: int, line: int, message: str, reason: str = INVALID_INPUT
) -> InputRecord:
    return InputRecord(file, n, line, f"{file}:{n}", None, message, reason)


def changed_record(file: str, n: int, exc: InputChanged) -> InputRecord:
    """The record standing for what could not be read of an object that changed while it
    was read (from record ``n`` on)."""
    return invalid_record(
        file,
        n,
        0,
        f"{file}: records from {n} on were not read: {exc}; "
        "`agac run WF --new` takes the input as it is now",
        INPUT_CHANGED,
    )


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
