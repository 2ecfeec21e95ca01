"""Records of a columnar batch as columns: keys and payload JSON text built by Arrow
compute over whole arrays, never a dict per row (the input snapshot's bulk path).

:func:`block_of` turns one record batch into a :class:`RecordBlock` whose payload texts
are byte for byte what :func:`agac.jsontext.dumps` writes of the record's object
(compact, UTF-8 kept, the columns in schema order), and whose keys are what
:func:`agac.data.records.key_of` makes of the ``id_field`` values. Strings without a
character JSON escapes, integers, booleans and nulls are written by Arrow; any other
column is encoded value by value by ``dumps`` itself. A batch whose keys need a
record's own handling (a missing, empty or non-text, non-integer id; repeated column
names) is no block: its rows are read one by one as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agac.data.arrow import require
from agac.data.arrowjson import json_values
from agac.jsontext import dumps

__all__ = ["RecordBlock", "block_of"]

_ESCAPED = r'[\x00-\x1f"\\]'
"""What ``dumps`` writes other than as it is in a string (ensure_ascii off)."""


@dataclass(frozen=True, slots=True)
class RecordBlock:
    """Consecutive valid records of one file: ``keys[i]`` and ``payloads[i]`` (JSON text)
    are those of the record at position ``first + i`` (1-based), on no line (0)."""

    file: str
    first: int
    keys: list[str]
    payloads: list[str]
    ascending: bool = False
    """Each key sorts after the one before (code point order): none repeats in the block."""

    def __len__(self) -> int:
        return len(self.keys)

    def head(self, count: int) -> RecordBlock:
        """The block's first ``count`` records."""
        return RecordBlock(
            self.file, self.first, self.keys[:count], self.payloads[:count], self.ascending
        )


def block_of(batch: Any, file: str, before: int, id_field: str | None) -> RecordBlock | None:
    """The rows of ``batch`` (an Arrow record batch, ``before`` rows of ``file`` read
    before it) as a block, or None when a row needs its own handling."""
    names = list(batch.schema.names)
    if not names or len(set(names)) != len(names):
        return None
    found = _keys(batch, names, file, before, id_field)
    if found is None:
        return None
    keys, ascending = found
    pc = require("pyarrow.compute")
    parts: list[Any] = []
    for i, name in enumerate(names):
        parts.append(("{" if i == 0 else ",") + dumps(name) + ":")
        parts.append(_texts(batch.column(i)))
    parts.extend(["}", ""])  # the last argument is the separator
    payloads = pc.binary_join_element_wise(*parts).to_pylist()
    return RecordBlock(file, before + 1, keys, payloads, ascending)


def _keys(
    batch: Any, names: list[str], file: str, before: int, id_field: str | None
) -> tuple[list[str], bool] | None:
    """The batch's keys, and whether they ascend (text ids only: UTF-8 byte order is
    code point order)."""
    if id_field is None:
        return [f"{file}:{n}" for n in range(before + 1, before + 1 + batch.num_rows)], False
    if id_field not in names:
        return None
    pa, pc = require("pyarrow"), require("pyarrow.compute")
    ids = batch.column(names.index(id_field))
    kind = ids.type
    if ids.null_count:
        return None
    if pa.types.is_integer(kind):
        return ids.cast(pa.string()).to_pylist(), False
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return None
    if len(ids) and pc.any(pc.equal(pc.binary_length(ids), 0)).as_py():
        return None
    ascending = len(ids) < 2 or bool(pc.all(pc.less(ids[:-1], ids[1:])).as_py())
    return ids.to_pylist(), ascending


def _texts(array: Any) -> Any:
    """Each value's JSON text (an Arrow string array)."""
    pa, pc = require("pyarrow"), require("pyarrow.compute")
    kind = array.type
    t = pa.types
    if t.is_string(kind) or t.is_large_string(kind):
        if not len(array) or not pc.any(pc.match_substring_regex(array, _ESCAPED)).as_py():
            quoted = pc.binary_join_element_wise('"', array.cast(pa.string()), '"', "")
            return pc.fill_null(quoted, "null")
    elif t.is_integer(kind):
        return pc.fill_null(array.cast(pa.string()), "null")
    elif t.is_boolean(kind):
        return pc.fill_null(pc.if_else(array, "true", "false"), "null")
    elif t.is_null(kind):
        return pa.array(["null"] * len(array), pa.string())
    return pa.array([dumps(v) for v in json_values(array)], pa.string())
