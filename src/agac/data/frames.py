"""Records given in memory (docs/python.md): an iterable of dicts, a pandas or polars
DataFrame, or an Arrow table, turned into JSON records.

Values go through Arrow where there is a table (pandas, polars, Arrow) and through the
same rules where there is none (dicts):

- NaN and infinite floats (and pandas ``NaT``) become null;
- timestamps, dates and times become ISO-8601 text (``2026-03-01T12:00:00+00:00``);
  durations become seconds; decimals become floats; tuples and numpy arrays lists;
- bytes are refused (``invalid_input``, naming the column or the record and field):
  a record is JSON, so decode the text or base64 it first; so is any other value JSON
  cannot hold.

A pandas DataFrame's index is not a field: ``df.reset_index()`` keeps it. A pandas object
column whose values Arrow cannot type (mixed ints and strings) is read row by row under
the same rules.

:func:`spool_records` writes them, streaming, as JSON lines into a file and hashes them,
so a run snapshots them at admission exactly like an input file (and knows when a later
call brings different records).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from agac.data.arrow import require
from agac.errors import ConfigError, Problem

__all__ = ["RECORDS_NAME", "RecordsSpool", "json_records", "spool_records"]

RECORDS_NAME = "records"
"""The input name of records given in memory: keys are ``records:<n>`` without id_field."""

_BATCH_ROWS = 10_000
_HINT = "give text, numbers, booleans, timestamps, lists or objects; decode bytes or base64 them"


@dataclass(frozen=True)
class RecordsSpool:
    """Records written as JSON lines: the file, the sha256 of its bytes, how many."""

    path: Path
    digest: str
    count: int

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _line(record: Any) -> bytes:
    """One record as a JSON line. A lone surrogate in its text cannot be UTF-8: it is
    written escaped (``\\ud800``), and reading the spool fails that record alone
    (``invalid_input``), as it would in an input file."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(record, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


def spool_records(records: Any, folder: Path | None = None) -> RecordsSpool:
    """Write ``records`` (see :func:`json_records`) to a new file in ``folder`` (the system
    temporary folder by default) as JSON lines; ConfigError ``invalid_input`` for a value
    that cannot be a record's."""
    folder = Path(folder or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"records-{uuid.uuid4().hex[:12]}.jsonl"
    digest = hashlib.sha256()
    count = 0
    try:
        with path.open("xb") as out:
            for record in json_records(records):
                line = _line(record)
                digest.update(line)
                out.write(line)
                count += 1
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return RecordsSpool(path, digest.hexdigest(), count)


def json_records(records: Any) -> Iterator[Any]:
    """The records as JSON values, in order, streaming (a DataFrame in Arrow batches).
    An element that is not an object is yielded as it is: it becomes an invalid record
    (``invalid_input``), as a JSONL line that is not an object does."""
    module = type(records).__module__.partition(".")[0]
    if module == "pandas":
        return _from_pandas(records)
    if module == "polars":
        return _from_arrow(_polars_arrow(records))
    if module == "pyarrow" or hasattr(records, "__arrow_c_stream__"):
        return _from_arrow(records)
    if isinstance(records, Mapping):
        raise _refused("records is one dict; give an iterable of dicts (a list of records)", 0)
    if isinstance(records, str | bytes) or not isinstance(records, Iterable):
        raise _refused(
            f"records must be an iterable of dicts, a pandas or polars DataFrame or "
            f"an Arrow table, not {type(records).__name__}",
            0,
        )
    return _from_dicts(records)


def _from_dicts(records: Iterable[Any]) -> Iterator[Any]:
    for n, record in enumerate(records, start=1):
        if isinstance(record, Mapping):
            yield {str(k): _value(v, n, str(k)) for k, v in record.items()}
        else:
            yield _value(record, n, "")


def _polars_arrow(frame: Any) -> Any:
    if type(frame).__name__ == "LazyFrame":
        frame = frame.collect()
    return frame.to_arrow()


def _from_pandas(frame: Any) -> Iterator[Any]:
    pa = require("pyarrow")
    if type(frame).__name__ == "Series":
        raise _refused("records is a pandas Series; give a DataFrame (series.to_frame())", 0)
    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return _pandas_rows(frame)  # object columns of mixed types: row by row, same rules
    return _from_arrow(table)


def _pandas_rows(frame: Any) -> Iterator[Any]:
    for start in range(0, len(frame), _BATCH_ROWS):
        chunk = frame.iloc[start : start + _BATCH_ROWS].to_dict(orient="records")
        for offset, record in enumerate(chunk):
            n = start + offset + 1
            yield {str(k): _value(v, n, str(k)) for k, v in record.items()}


def _from_arrow(data: Any) -> Iterator[Any]:
    pa = require("pyarrow")
    if isinstance(data, pa.Table):
        batches: Iterable[Any] = data.to_batches(max_chunksize=_BATCH_ROWS)
        schema = data.schema
    elif isinstance(data, pa.RecordBatch):
        batches, schema = [data], data.schema
    else:
        reader = (
            data
            if isinstance(data, pa.RecordBatchReader)
            else pa.RecordBatchReader.from_stream(data)
        )
        batches, schema = reader, reader.schema
    for field in schema:
        if _holds_binary(pa, field.type):
            raise _refused(
                f"records column {field.name!r} holds bytes ({field.type}); a record is JSON",
                0,
                field.name,
            )
    return _arrow_rows(batches)


def _arrow_rows(batches: Iterable[Any]) -> Iterator[Any]:
    n = 0
    for batch in batches:
        for record in batch.to_pylist():
            n += 1
            yield {str(k): _value(v, n, str(k)) for k, v in record.items()}


def _holds_binary(pa: Any, kind: Any) -> bool:
    types = pa.types
    if (
        types.is_binary(kind)
        or types.is_large_binary(kind)
        or types.is_fixed_size_binary(kind)
        or getattr(types, "is_binary_view", lambda _: False)(kind)
    ):
        return True
    return any(_holds_binary(pa, kind.field(i).type) for i in range(kind.num_fields))


def _value(value: Any, n: int, field: str) -> Any:
    """One value as JSON (see the module docstring); ConfigError for what cannot be."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if type(value).__name__ in ("NaTType", "NAType"):  # pandas' missing values
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _value(v, n, f"{field}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_value(v, n, field) for v in value]
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else None
    if isinstance(value, bytes | bytearray | memoryview):
        raise _refused(f"records:{n}: field {field!r} is bytes; a record is JSON", n, field)
    if isinstance(value, uuid.UUID):
        return str(value)
    if type(value).__module__ == "numpy":  # numpy scalars and arrays (pandas to_dict gives them)
        return _value(value.tolist(), n, field)
    raise _refused(
        f"records:{n}: field {field!r} is a {type(value).__name__}, which a JSON "
        "record cannot hold",
        n,
        field,
    )


def _refused(message: str, n: int, field: str = "") -> ConfigError:
    return ConfigError(
        problems=[Problem("invalid_input", message, RECORDS_NAME, n, hint=_HINT, path=field)]
    )
