"""Streaming readers of input files and record identity (docs/getting-started.md; docs/guarantees.md, The store).

Every record of an input file becomes exactly one :class:`InputRecord`, in file order.
A record that cannot be read (a malformed JSONL line, a JSON value that is not an
object, a CSV row with the wrong number of fields, a CSV quote never closed — which
would otherwise swallow every later row —, bytes that are not UTF-8, a value no store
can hold: ``NaN``/``Infinity``, a number too large for a float, an escaped lone
surrogate such as ``"\\ud800"``) is *not* raised and *not* dropped: it is yielded with
``reason="invalid_input"`` and an ``error`` naming file and line, because it is a unit
in every action's count (S4). A JSON array element is checked the same way, from its own
bytes, and the elements after a bad one are read; an array whose structure breaks (cut
off, a string or bracket never closed, text after the closing ``]``) yields the elements
before the damage, then one invalid record naming where reading stopped.

Nothing here loads a whole file: JSONL is read line by line, CSV row by row and JSON
arrays element by element (:mod:`agac.data.jsonarray`), each decompressed on the fly when its name ends
``.gz``, ``.zst``, ``.bz2`` or ``.xz``; parquet and Arrow files are read by record batches
of the columns asked for (:mod:`agac.data.columnar`). Memory is bounded by the largest
record (a record batch for columnar files).

Record keys: ``id_field``'s value as a string when an ``id_field`` is set (a record
without one is invalid and falls back to the positional key), else the positional key
``<file name>:<n>`` — ``n`` is the 1-based JSONL line number (blank lines are skipped
but counted), CSV data row (header and blank lines excluded), JSON array element or
parquet/Arrow row. ``id_field`` names a top-level field.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import itertools
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from agac.data.blocks import RecordBlock
from agac.data.files import InputChanged, InputFile, LocalFile
from agac.data.formats import decompressed, format_of
from agac.data.jsonarray import Broken, Element, elements
from agac.data.records import (
    DUPLICATE_KEY,
    INPUT_CHANGED,
    INVALID_INPUT,
    InputRecord,
    changed_record,
    invalid_record,
    record_of,
)
from agac.jsontext import Flaw, flaw

__all__ = [
    "DUPLICATE_KEY",
    "INPUT_CHANGED",
    "INVALID_INPUT",
    "InputRecord",
    "file_fingerprint",
    "iter_input",
    "read_input",
    "read_input_blocks",
    "read_records",
    "unique_keys",
    "unique_record_keys",
]

# Undecodable bytes survive CSV decoding as lone surrogates (``surrogateescape``), so a
# bad row can be failed on its own instead of aborting the rest of the file.
_SURROGATES = re.compile("[\udc80-\udcff]")
_CHUNK = 1 << 20


def read_records(
    path: Path,
    id_field: str | None,
    *,
    name: str | None = None,
) -> Iterator[InputRecord]:
    """Yield every record of ``path`` in file order, streaming (see module docstring).

    The format follows the extension (``.jsonl``, ``.json``, ``.csv``, ``.parquet``,
    ``.arrow``, ``.feather``, a row format compressed ``.gz``/``.zst``/``.bz2``/``.xz``;
    any case). ``name`` is what keys and messages call the file (default: its file name).
    Raises ``ValueError`` for another extension and ``OSError`` when the file cannot be
    opened; everything wrong *inside* a row file becomes an invalid record.
    """
    fmt = format_of(path.name)
    if fmt is None:
        raise ValueError(f"{path.name}: unsupported input file type {path.suffix!r}")
    file = LocalFile(path, fmt)
    return read_input(file, id_field, name=name)


def read_input(
    file: InputFile,
    id_field: str | None,
    *,
    name: str | None = None,
    columns: frozenset[str] | None = None,
) -> Iterator[InputRecord]:
    """Yield every record of ``file`` in order, streaming, as its format says.

    ``columns`` (columnar formats only; None = all) are the top-level fields to read;
    ``id_field`` is always read. A columnar file that cannot be opened, or that has a
    column of a type with no JSON form among those read, raises ConfigError
    (``input_unreadable``, ``unsupported_column``) before its first record.
    """
    label = name or file.name
    kind = file.format.kind
    if file.format.columnar:
        from agac.data.columnar import read_columnar

        return read_columnar(file, id_field, columns, label)
    if kind == "jsonl":
        return _read_jsonl(file, id_field, label)
    if kind == "json":
        return _read_json_array(file, id_field, label)
    return _read_csv(file, id_field, label)


def read_input_blocks(
    file: InputFile, id_field: str | None, *, columns: frozenset[str] | None = None
) -> Iterator[InputRecord | RecordBlock]:
    """The records of :func:`read_input`, a columnar file's batches as blocks where they
    can be (:func:`agac.data.columnar.read_columnar_blocks`)."""
    if file.format.columnar:
        from agac.data.columnar import read_columnar_blocks

        return read_columnar_blocks(file, id_field, columns, file.name)
    return read_input(file, id_field, columns=columns)


def iter_input(files: Iterable[Path], id_field: str | None) -> Iterator[InputRecord]:
    """Yield the records of ``files`` in order, with keys made unique across them.

    The first record with a key keeps it. A later record with the same key fails with
    ``duplicate_key`` (unless it is already invalid) and gets its positional key
    ``<file name>:<n>`` instead, so every yielded key is unique and can identify its
    unit in the store; its payload is kept for the record's session. Memory grows with
    the number of keys only.
    """
    return unique_keys(r for path in files for r in read_records(path, id_field))


def unique_keys(records: Iterable[InputRecord]) -> Iterator[InputRecord]:
    """``records`` with keys made unique as :func:`iter_input` says. Keys are remembered as
    UTF-8 bytes, a third smaller than strings (a 2,000,000-record input holds them all)."""
    seen: set[bytes] = set()
    for record in records:
        yield _unique(record, seen)


def unique_record_keys(
    items: Iterable[InputRecord | RecordBlock],
) -> Iterator[InputRecord | RecordBlock]:
    """As :func:`unique_keys` for the records among ``items``; blocks pass as they are
    (their keys are checked once stored: :meth:`agac.store.snapshots.SnapshotRepository.write_snapshot`)."""
    seen: set[bytes] = set()
    for item in items:
        yield item if isinstance(item, RecordBlock) else _unique(item, seen)


def _unique(record: InputRecord, seen: set[bytes]) -> InputRecord:
    if record.key.encode() in seen:
        record = _as_duplicate(record, seen)
    seen.add(record.key.encode())
    return record


def file_fingerprint(path: Path) -> str:
    """Return the sha256 hex digest of the file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# --- record construction ------------------------------------------------------------


def _as_duplicate(record: InputRecord, seen: set[bytes]) -> InputRecord:
    key = f"{record.file}:{record.n}"
    suffix = 1
    while key.encode() in seen:  # only when an id value looks like another file's positional key
        key = f"{record.file}:{record.n}~{suffix}"
        suffix += 1
    if record.reason is not None:
        return replace(record, key=key)
    where = f"{record.file}:{record.line}" if record.line else f"{record.file} element {record.n}"
    message = f"{where}: duplicate key {record.key!r}; an earlier record has the same key"
    return replace(record, key=key, error=message, reason=DUPLICATE_KEY)


# --- JSONL ------------------------------------------------------------------------


def _read_jsonl(file: InputFile, id_field: str | None, name: str) -> Iterator[InputRecord]:
    number = 0
    with _stream(file) as handle:
        try:
            for number, raw in enumerate(handle, start=1):
                if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                if not raw.strip():
                    continue
                yield _jsonl_record(name, number, raw, id_field)
        except InputChanged as exc:
            yield changed_record(name, number + 1, exc)
        except OSError as exc:
            yield invalid_record(
                name, number + 1, number + 1, f"{name}:{number + 1}: {_damage(file, exc)}"
            )


def _damage(file: InputFile, exc: BaseException) -> str:
    what = f"{file.format.compression} stream" if file.format.compression else "file"
    return (
        f"cannot read on: the {what} is damaged or cut off ({exc}); nothing after "
        "this point was read"
    )


@contextlib.contextmanager
def _stream(file: InputFile) -> Iterator[IO[bytes]]:
    """``file``'s bytes, decompressed (codec errors are OSError), closed when the block
    ends. Opening raises OSError as it is (a file that cannot be opened)."""
    raw = file.open_bytes()
    try:
        with decompressed(raw, file.format.compression) as stream:
            yield stream
    finally:
        raw.close()


def _jsonl_record(name: str, number: int, raw: bytes, id_field: str | None) -> InputRecord:
    try:
        value = _value_of(raw, f"{name}:{number}")
    except _Unreadable as exc:
        return invalid_record(name, number, number, str(exc))
    return record_of(name, number, number, value, id_field)


class _Unreadable(ValueError):
    """One record's text that is not a value agac can store; the message names where."""


def _value_of(raw: bytes, where: str) -> Any:
    """The JSON value of one record's bytes, read strictly: raises _Unreadable for text
    that is not UTF-8 or not JSON, ``NaN``/``Infinity``, a number too large for a float,
    nesting too deep, or an escaped lone surrogate (read from the raw text, before any
    decoder could have changed it)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Unreadable(f"{where}: not UTF-8 text ({exc.reason})") from None
    try:
        value = _STRICT.decode(text)
    except json.JSONDecodeError as exc:
        raise _Unreadable(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except _NotStorable as exc:
        raise _Unreadable(f"{where}: {exc}") from None
    except RecursionError:
        raise _Unreadable(f"{where}: JSON nested too deeply") from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None:
        found = flaw(value)  # a pair is one character by now: only a lone one is found
        if found is not None:
            raise _Unreadable(_flawed(where, found))
    return value


class _NotStorable(ValueError):
    """A number no store can hold in a JSONL line: ``NaN``, ``Infinity`` (which Python
    reads, JSON has not) or one too large for a float."""


def _refuse_constant(name: str) -> Any:
    raise _NotStorable(f"{name} is not JSON; write null, or the number as text")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        shown = text if len(text) <= 24 else f"{text[:20]}..."
        raise _NotStorable(f"{shown} is too large for a float; write it as text")
    return value


# One decoder: ``json.loads`` with options builds a new one per call.
_STRICT = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _flawed(where: str, found: Flaw) -> str:
    """The message of a record holding what agac cannot store (ASCII: the flaw is escaped)."""
    what = (
        f"{found.what} (a number too large for a float)"
        if found.what.endswith("Infinity")
        else found.what
    )
    at = f" at {found.path}" if found.path else ""
    return f"{where}: the record holds {what}{at}, which agac cannot store; write {found.fix} there"


# --- JSON arrays ------------------------------------------------------------------


def _read_json_array(
    file: InputFile,
    id_field: str | None,
    name: str,
) -> Iterator[InputRecord]:
    """Each element decoded from its own bytes (:mod:`agac.data.jsonarray`): a bad one is
    an invalid record naming its element and line, and the next one is read."""
    count = 0
    with _stream(file) as handle:
        try:
            for part in elements(handle):
                if isinstance(part, Broken):
                    yield invalid_record(name, part.n, 0, _broken(name, part))
                    return
                count = part.n
                yield _element_record(name, part, id_field)
        except InputChanged as exc:
            yield changed_record(name, count + 1, exc)
        except OSError as exc:
            yield invalid_record(
                name, count + 1, 0, f"{name} element {count + 1}: {_damage(file, exc)}"
            )


def _element_record(name: str, part: Element, id_field: str | None) -> InputRecord:
    where = f"{name} element {part.n} (line {part.line})"
    if not part.raw:
        message = f"{where}: no value between two commas (or a comma before ']'); remove one"
        return invalid_record(name, part.n, 0, message)
    try:
        value = _value_of(part.raw, where)
    except _Unreadable as exc:
        return invalid_record(name, part.n, 0, str(exc))
    return record_of(name, part.n, 0, value, id_field)


def _broken(name: str, part: Broken) -> str:
    if part.why == "not_array":
        return f"{name}: a .json input must be a JSON array"
    if part.why == "trailing":
        return (
            f"{name}:{part.line}: text after the array's closing ']'; "
            "a .json input is one JSON array (JSON Lines go in a .jsonl file)"
        )
    if part.why == "empty":
        return (
            f"{name}: JSON array is cut off or corrupt before the first element (the file is empty)"
        )
    count = part.n - 1
    where = f"after element {count}" if count else "before the first element"
    return (
        f"{name}: JSON array is cut off or corrupt {where} (line {part.line}: the file ends "
        "inside an element, or a string or bracket there is never closed); nothing after "
        "this point was read"
    )


# --- CSV --------------------------------------------------------------------------


def _read_csv(file: InputFile, id_field: str | None, name: str) -> Iterator[InputRecord]:
    n = 0
    with _text(file) as handle:
        try:
            for record in _csv_records(file, handle, id_field, name):
                n = record.n
                yield record
        except InputChanged as exc:
            yield changed_record(name, n + 1, exc)
        except OSError as exc:
            yield invalid_record(name, n + 1, 0, f"{name}: {_damage(file, exc)}")


@contextlib.contextmanager
def _text(file: InputFile) -> Iterator[IO[str]]:
    with _stream(file) as stream:
        yield io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape", newline="")


def _csv_records(
    file: InputFile,
    handle: IO[str],
    id_field: str | None,
    name: str,
) -> Iterator[InputRecord]:
    reader = csv.reader(handle)
    header = _csv_header(reader)
    if header is None:
        return
    n = 0
    rows = _csv_rows(reader)
    current = next(rows, None)
    while current is not None:
        start, end, row = current
        current = next(rows, None)
        n += 1
        if isinstance(row, csv.Error):
            yield invalid_record(name, n, start, f"{name}:{start}: unreadable CSV ({row})")
        elif (
            current is None
            and _may_run_to_the_end(start, end, row)
            and _quote_never_closed(file, start)
        ):
            # A stray quote makes the csv module read every later line into one
            # field; left alone, those rows would vanish into this record silently.
            yield invalid_record(
                name,
                n,
                start,
                f"{name}:{start}: a quoted field opens on this "
                "line and is never closed: everything to the end of the file "
                f"(line {end}) was read as this one row; close the quote (or "
                'double it: "")',
            )
        else:
            yield _csv_record(name, n, start, header, row, id_field)


def _csv_rows(reader: Any) -> Iterator[tuple[int, int, list[str] | csv.Error]]:
    """(first line, last line, row or the error reading it) for every non-blank row."""
    consumed = reader.line_num
    while True:
        start = consumed + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, reader.line_num, exc
            if reader.line_num == consumed:
                return
            consumed = reader.line_num
            continue
        consumed = reader.line_num
        if row:
            yield start, consumed, row


def _may_run_to_the_end(start: int, end: int, row: list[str]) -> bool:
    """Whether the last row could be a quote left open: it spans lines, or its last field
    kept the file's final line break (only then is the file read again to be sure)."""
    return end > start or row[-1].endswith(("\n", "\r"))


def _quote_never_closed(file: InputFile, start: int) -> bool:
    """True when the CSV row starting at line ``start`` runs to the end of the file inside
    a quoted field (read strictly, it ends with "unexpected end of data")."""
    with _text(file) as handle:
        try:
            next(csv.reader(itertools.islice(handle, start - 1, None), strict=True), None)
        except csv.Error as exc:
            return "unexpected end of data" in str(exc)
    return False


def _csv_header(reader: Any) -> list[str] | None:
    """The first non-blank row; None for a file without one."""
    for row in reader:
        if row:
            return [field.strip() for field in row]
    return None


def _csv_record(
    name: str, n: int, line: int, header: list[str], row: list[str], id_field: str | None
) -> InputRecord:
    if len(row) != len(header):
        message = f"{name}:{line}: CSV row has {len(row)} fields, the header has {len(header)}"
        return invalid_record(name, n, line, message)
    if _SURROGATES.search("".join(row)):
        return invalid_record(name, n, line, f"{name}:{line}: not UTF-8 text")
    return record_of(name, n, line, dict(zip(header, row, strict=True)), id_field)
