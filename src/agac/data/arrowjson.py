"""What the values of a parquet or Arrow column become in a record (JSON).

A record is JSON, so every column type has one documented JSON form
(docs/workflow-reference.md, "What a column becomes"):

- strings, integers, booleans, null: as they are; floats as numbers, NaN and infinities
  as null;
- **timestamps**: ISO-8601 text, ``2026-12-01T10:00:00`` with as many fraction digits as
  the column's unit (``.123`` ms, ``.123456`` µs, ``.123456789`` ns, none for seconds);
  a column with a time zone shows the time in that zone with its offset
  (``2026-12-01T10:00:00+00:00``); dates ``2026-12-01``; times ``10:00:00.000``;
- **durations**: seconds, a number (``1.5``);
- **decimals**: text holding the exact value (``"12.50"``): a float would round it;
- **binaries** (binary, large, fixed size): standard base64 text with padding; UUIDs
  (``arrow.uuid``) their canonical text;
- **structs** become objects, **lists** (any kind) arrays, **maps** objects with their
  keys as text; dictionary-encoded columns their values;
- unions, intervals and run-end encoded columns have no JSON form:
  :func:`unsupported` names them, and an input reading such a column is refused
  (``unsupported_column``) naming it — leave it out of what the workflow reads, or cast it.

Conversion runs on whole Arrow arrays (pyarrow compute), not value by value, except for
binaries (base64) and maps.
"""

from __future__ import annotations

import base64
from typing import Any

from agac.data.arrow import require

__all__ = ["json_values", "unsupported"]

_MAP_KEY, _MAP_VALUE = "\x00agac-key", "\x00agac-value"


def unsupported(kind: Any) -> str | None:
    """Why the Arrow type ``kind`` has no JSON form (naming the part), or None."""
    pa = require("pyarrow")
    t = pa.types
    if t.is_union(kind):
        return f"a union ({kind})"
    if t.is_interval(kind):
        return f"an interval ({kind})"
    if t.is_run_end_encoded(kind):
        return f"run-end encoded ({kind})"
    if isinstance(kind, pa.BaseExtensionType):
        if _is_uuid(kind):
            return None
        return unsupported(kind.storage_type)
    if t.is_dictionary(kind):
        return unsupported(kind.value_type)
    if t.is_map(kind):
        return unsupported(kind.key_type) or unsupported(kind.item_type)
    if t.is_struct(kind):
        for i in range(kind.num_fields):
            if why := unsupported(kind.field(i).type):
                return why
        return None
    if _is_list(pa, kind):
        return unsupported(kind.value_type)
    if _plain(pa, kind) or _special(pa, kind):
        return None
    return f"a {kind} column"


def json_values(array: Any) -> list[Any]:
    """The JSON value of every element of ``array`` (an Arrow array), in order."""
    pa = require("pyarrow")
    kind = array.type
    if _plain(pa, kind) and not pa.types.is_floating(kind):
        return array.to_pylist()  # type: ignore[no-any-return]
    if _is_binary(pa, kind):
        return [
            None if v is None else base64.b64encode(v).decode("ascii") for v in array.to_pylist()
        ]
    values = _convert(pa, array).to_pylist()
    if _has_map(pa, kind):
        return [_objects(v) for v in values]
    return values  # type: ignore[no-any-return]


def _plain(pa: Any, kind: Any) -> bool:
    t = pa.types
    return bool(
        t.is_null(kind)
        or t.is_boolean(kind)
        or t.is_integer(kind)
        or t.is_floating(kind)
        or t.is_string(kind)
        or t.is_large_string(kind)
        or t.is_string_view(kind)
    )


def _special(pa: Any, kind: Any) -> bool:
    t = pa.types
    return bool(t.is_decimal(kind) or t.is_temporal(kind) or _is_binary(pa, kind))


def _is_binary(pa: Any, kind: Any) -> bool:
    t = pa.types
    return bool(
        t.is_binary(kind)
        or t.is_large_binary(kind)
        or t.is_fixed_size_binary(kind)
        or t.is_binary_view(kind)
    )


def _is_list(pa: Any, kind: Any) -> bool:
    t = pa.types
    return bool(
        t.is_list(kind)
        or t.is_large_list(kind)
        or t.is_fixed_size_list(kind)
        or t.is_list_view(kind)
        or t.is_large_list_view(kind)
    )


def _is_uuid(kind: Any) -> bool:
    return getattr(kind, "extension_name", "") == "arrow.uuid"


def _has_map(pa: Any, kind: Any) -> bool:
    t = pa.types
    if t.is_map(kind):
        return True
    if isinstance(kind, pa.BaseExtensionType):
        return False if _is_uuid(kind) else _has_map(pa, kind.storage_type)
    if t.is_dictionary(kind):
        return _has_map(pa, kind.value_type)
    if t.is_struct(kind):
        return any(_has_map(pa, kind.field(i).type) for i in range(kind.num_fields))
    return _is_list(pa, kind) and _has_map(pa, kind.value_type)


def _objects(value: Any) -> Any:
    """``value`` with every converted map (a list of key/value structs) as an object."""
    if isinstance(value, list):
        if value and isinstance(value[0], dict) and _MAP_KEY in value[0]:
            return {str(e[_MAP_KEY]): _objects(e[_MAP_VALUE]) for e in value}
        return [_objects(v) for v in value]
    if isinstance(value, dict):
        return {k: _objects(v) for k, v in value.items()}
    return value


def _convert(pa: Any, array: Any) -> Any:
    """``array`` as an Arrow array whose ``to_pylist`` gives the JSON forms (maps as lists
    of key/value structs, made objects by :func:`_objects`)."""
    pc = require("pyarrow.compute")
    t, kind = pa.types, array.type
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([_convert(pa, c) for c in array.chunks])
    if t.is_floating(kind):
        floats = array.cast(pa.float64()) if t.is_float16(kind) else array
        return pc.if_else(pc.is_finite(floats), floats, None)
    if _plain(pa, kind):
        return array
    if t.is_timestamp(kind):
        return _timestamps(pa, pc, array)
    if t.is_date(kind) or t.is_time(kind) or t.is_decimal(kind):
        return array.cast(pa.string())
    if t.is_duration(kind):
        per_second = {"s": 1, "ms": 1e3, "us": 1e6, "ns": 1e9}[kind.unit]
        return pc.divide(array.cast(pa.int64()).cast(pa.float64()), per_second)
    if _is_binary(pa, kind):
        return pa.array(json_values(array), pa.string())
    if isinstance(kind, pa.BaseExtensionType):
        if _is_uuid(kind):
            return pa.array([None if v is None else str(v) for v in array.to_pylist()], pa.string())
        return _convert(pa, array.storage)
    if t.is_dictionary(kind):
        return _convert(pa, array.dictionary_decode())
    if t.is_struct(kind):
        children = [_convert(pa, child) for child in array.flatten()]
        names = [kind.field(i).name for i in range(kind.num_fields)]
        return pa.StructArray.from_arrays(children, names=names, mask=array.is_null())
    if t.is_map(kind):
        offsets = pc.subtract(array.offsets, array.offsets[0])
        entries = pa.StructArray.from_arrays(
            [_convert(pa, array.keys), _convert(pa, array.items)], names=[_MAP_KEY, _MAP_VALUE]
        )
        return pa.ListArray.from_arrays(offsets, entries, mask=array.is_null())
    if _is_list(pa, kind):
        if not (t.is_list(kind) or t.is_large_list(kind)):
            array = array.cast(pa.large_list(kind.value_type))
        offsets = pc.subtract(array.offsets, array.offsets[0])
        values = _convert(pa, array.flatten())
        build = pa.LargeListArray if t.is_large_list(array.type) else pa.ListArray
        return build.from_arrays(offsets, values, mask=array.is_null())
    raise TypeError(f"no JSON form for {kind}")  # unsupported() refuses it before reading


def _timestamps(pa: Any, pc: Any, array: Any) -> Any:
    kind = array.type
    if kind.tz is None:
        return pc.strftime(array, format="%Y-%m-%dT%H:%M:%S")
    text = pc.strftime(array, format="%Y-%m-%dT%H:%M:%S%z")
    return pc.replace_substring_regex(text, pattern=r"([+-]\d\d)(\d\d)$", replacement=r"\1:\2")
