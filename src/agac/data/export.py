"""Export writers (``agac export``, DESIGN §9, §15).

Two shapes of rows:

- **per action** (``--action A`` with jsonl/csv): a mapping with ``key``, ``status``,
  ``reason`` and ``output`` (the answer's JSON value, None when there is none), plus
  ``detail`` when there is something to say (an error message), and the run's ``tenant``
  (T2);
- **wide** (``--all-actions``, ``--include-source``, parquet): the rows of
  :class:`~agac.data.results.ResultTable`, one per record, a list of values in column
  order.

Writers stream: JSONL and CSV hold one row at a time, parquet one row group, so an
export of any size runs in bounded memory; each returns the number of rows written.

Every JSON they write (a JSONL line, a JSON cell of a CSV) is strict JSON: a stored value
that is not (a NaN or an infinity an earlier agac let through) stops the export with a
StoreError naming the record, instead of writing ``NaN`` where a reader expects JSON.
"""

from __future__ import annotations

import contextlib
import csv
import os
import sys
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO

from agac.errors import StoreError, UsageError
from agac.jsontext import NotJSON, strict_dumps

if TYPE_CHECKING:
    from agac.data.results import ResultTable

__all__ = ["CSV_COLUMNS", "open_binary_output", "open_output", "write_csv", "write_jsonl",
           "write_parquet", "write_wide_csv", "write_wide_jsonl"]

#: Column order of CSV exports.
CSV_COLUMNS: tuple[str, ...] = ("key", "status", "reason", "detail", "output", "tenant")


def write_jsonl(rows: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    """Write each row as one JSON object per line; ``detail`` only when present.

    Keys come in the order key, status, reason, output, detail, tenant (the last two
    when the row has them). Non-ASCII text is written as is (UTF-8 files). Returns the
    number of rows written.
    """
    count = 0
    with _strict() as at:
        for row in rows:
            at.key = row["key"]
            item: dict[str, Any] = {
                "key": row["key"],
                "status": row["status"],
                "reason": row.get("reason"),
                "output": row.get("output"),
            }
            if row.get("detail") is not None:
                item["detail"] = row["detail"]
            if row.get("tenant") is not None:
                item["tenant"] = row["tenant"]
            out.write(strict_dumps(item))
            out.write("\n")
            count += 1
    return count


def write_csv(rows: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    """Write a header of :data:`CSV_COLUMNS`, then one line per row.

    ``output`` (and a non-string ``detail``) is written as compact JSON text; a missing
    value is an empty cell. Returns the number of rows written (header excluded).
    """
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    count = 0
    with _strict() as at:
        for row in rows:
            at.key = row["key"]
            writer.writerow(
                [
                    row["key"],
                    row["status"],
                    _cell(row.get("reason")),
                    _cell(row.get("detail")),
                    "" if row.get("output") is None else _compact(row["output"]),
                    _cell(row.get("tenant")),
                ]
            )
            count += 1
    return count


def write_wide_jsonl(names: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO) -> int:
    """Each wide row as one JSON object keyed by column name (JSON columns as JSON values,
    not text: build the rows with ``json_text=False``)."""
    count = 0
    with _strict() as at:
        for row in rows:
            at.key = row[0] if row else None
            out.write(strict_dumps(dict(zip(names, row, strict=True))))
            out.write("\n")
            count += 1
    return count


def write_wide_csv(names: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO) -> int:
    """A header of column names, then one line per wide row: lists, objects and booleans as
    compact JSON, a missing value as an empty cell."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    count = 0
    with _strict() as at:
        for row in rows:
            at.key = row[0] if row else None
            writer.writerow([_wide_cell(v) for v in row])
            count += 1
    return count


class _Position:
    """The record an export is writing (for the message when its value is not JSON)."""

    key: Any = None


@contextlib.contextmanager
def _strict() -> Iterator[_Position]:
    """Turn a stored value that is not strict JSON into a StoreError naming its record."""
    at = _Position()
    try:
        yield at
    except NotJSON as exc:
        key = exc.record if exc.record is not None else at.key
        where = f"record {key!r}: " if key is not None else ""
        raise StoreError(f"{where}a stored value holds {exc.flaw}, which strict JSON cannot "
                         "hold; the export stopped",
                         hint="an earlier agac stored it; answer the record again "
                              "(agac retry, or agac run --fresh)") from exc


def write_parquet(table: ResultTable, row_groups: Iterable[Sequence[Sequence[Any]]],
                  out: IO[bytes]) -> int:
    """Parquet (zstd), one row group per item of ``row_groups``; needs pyarrow."""
    from agac.data.arrow import arrow_schema, record_batch, require

    pq = require("pyarrow.parquet")
    schema = arrow_schema(table)
    count = 0
    with pq.ParquetWriter(out, schema, compression="zstd") as writer:
        for rows in row_groups:
            if rows:
                writer.write_batch(record_batch(schema, rows), row_group_size=len(rows))
                count += len(rows)
    return count


@contextlib.contextmanager
def open_output(path: str | None) -> Iterator[TextIO]:
    """Yield the text stream an export writes to: stdout when ``path`` is None.

    A file is written to a temporary sibling and moved into place when the block
    ends without an error, so a failed export never leaves a half-written file (nor
    clobbers an earlier one). Missing parent folders are created. A ``path`` that is a
    folder is refused (UsageError) before anything is read.
    """
    if path is None:
        yield sys.stdout
        sys.stdout.flush()
        return
    with _replacing(Path(path), "results.jsonl") as tmp, \
            tmp.open("x", encoding="utf-8", newline="") as handle:
        yield handle


@contextlib.contextmanager
def open_binary_output(path: str) -> Iterator[IO[bytes]]:
    """As :func:`open_output`, for a binary file (parquet); a path is required."""
    with _replacing(Path(path), "results.parquet") as tmp, tmp.open("xb") as handle:
        yield handle


@contextlib.contextmanager
def _replacing(target: Path, example: str) -> Iterator[Path]:
    """A temporary sibling of ``target``, moved onto it when the block succeeds; a
    ``target`` that is a folder is refused (UsageError) before anything is written."""
    if target.is_dir():
        raise UsageError(f"{target} is a folder, not a file",
                         hint=f"name the file to write, e.g. {target / example}")
    target.parent.mkdir(parents=True, exist_ok=True)
    # A plain exclusive open (not mkstemp) so the file gets the usual umask permissions.
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _wide_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list | dict | bool):
        return _compact(value)
    return value


def _compact(value: Any) -> str:
    return strict_dumps(value, separators=(",", ":"))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _compact(value)
