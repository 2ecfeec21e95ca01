"""Export writers (``agac export``, docs/cli.md, agac events; docs/python.md).

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

A CSV cell a spreadsheet would run as a formula (``=…``, ``+…``, ``-…``, ``@…``, a
leading tab or carriage return) gets a leading ``'`` unless ``escape_formulas=False``:
source fields, keys and model output are anyone's text. Both CSV shapes use the same
rule, so a key reads the same in either.

An output is stdout, a local file, or an object — ``s3://bucket/key``, ``gs://…``,
``az://…`` — written through obstore as a multipart upload in parts of
:data:`PART_BYTES`: the object appears under its name only when the upload completes, so
a failed export leaves nothing there (and an earlier object of that name as it was). Its
parts are aborted when the server still answers; a bucket rule for incomplete multipart
uploads removes those it could not abort.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import stat
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TextIO

from agac.errors import AgacError, ProtectedFile, StoreError, UsageError
from agac.jsontext import NotJSON, strict_dumps
from agac.objectstores import is_cloud_url, open_cloud_store, require_obstore

if TYPE_CHECKING:
    from agac.data.results import ResultTable

__all__ = [
    "CSV_COLUMNS",
    "EXPORT_FORMATS",
    "FORMULA_STARTS",
    "PART_BYTES",
    "ExportFailed",
    "Protected",
    "export_format",
    "neutralize_formula",
    "open_binary_output",
    "open_output",
    "write_csv",
    "write_jsonl",
    "write_parquet",
    "write_wide_csv",
    "write_wide_jsonl",
]

PART_BYTES = 8 << 20
"""Bytes of one part of an upload to object storage (at most a few are in flight)."""
_PARTS_IN_FLIGHT = 4


class ExportFailed(AgacError):
    """The export could not be written where it was asked to go; nothing was written under
    its name."""

    exit_code = 1
    code = "export_failed"


class Protected(NamedTuple):
    """A file an export must never write (X1), and what it is, for the refusal: "the
    store's database file", "an input file of workflow review_triage"."""

    path: Path
    what: str


#: Column order of CSV exports.
CSV_COLUMNS: tuple[str, ...] = ("key", "status", "reason", "detail", "output", "tenant")


def write_jsonl(rows: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    """Write each row as one JSON object per line; ``detail`` only when present.

    Keys come in the order key, status, reason, output, detail, tenant, checks, turns,
    tool_calls, citations (the last six when the row has them; ``checks`` maps each check's name to
    whether it passed). Non-ASCII text is written as is (UTF-8 files). Returns the
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
            if row.get("checks") is not None:
                item["checks"] = row["checks"]
            if "tool_calls" in row:  # an action with tools: its loop's size
                item["turns"] = row["turns"]
                item["tool_calls"] = row["tool_calls"]
            if "citations" in row:  # an action with web search: the sources it cites
                item["citations"] = row["citations"]
            out.write(strict_dumps(item))
            out.write("\n")
            count += 1
    return count


def write_csv(
    rows: Iterable[Mapping[str, Any]],
    out: TextIO,
    *,
    escape_formulas: bool = True,
    checks: Sequence[str] = (),
    tools: bool = False,
    citations: bool = False,
) -> int:
    """Write a header of :data:`CSV_COLUMNS` and a ``check.<name>`` column per name of
    ``checks`` (with ``tools``, then ``turns`` and ``tool_calls``; with ``citations``, then
    ``citations``: the cited sources as compact JSON), then one line per row.

    ``output`` (and a non-string ``detail``) is written as compact JSON text; a check's
    cell is ``pass``, ``fail``, or empty for a unit it did not judge; a missing value is an
    empty cell; with ``escape_formulas`` a cell a spreadsheet would run is neutralized
    (:func:`neutralize_formula`). Returns the number of rows written (header excluded).
    """
    writer = _CsvWriter(out)
    loop = ("turns", "tool_calls") if tools else ()
    cited = ("citations",) if citations else ()
    writer.writerow((*CSV_COLUMNS, *(f"check.{name}" for name in checks), *loop, *cited))
    safe = neutralize_formula if escape_formulas else _as_is
    count = 0
    with _strict() as at:
        for row in rows:
            at.key = row["key"]
            writer.writerow(
                [
                    safe(row["key"]),
                    row["status"],
                    _cell(row.get("reason")),
                    safe(_cell(row.get("detail"))),
                    "" if row.get("output") is None else safe(_compact(row["output"])),
                    safe(_cell(row.get("tenant"))),
                    *_verdict_cells(row.get("checks"), checks),
                    *(_cell(row.get(k)) for k in loop),
                    *(safe(_compact(row.get("citations") or [])) for _ in cited),
                ]
            )
            count += 1
    return count


def _verdict_cells(verdicts: Any, names: Sequence[str]) -> list[str]:
    if not isinstance(verdicts, dict):
        return [""] * len(names)
    return [
        "" if (v := verdicts.get(name)) is None else ("pass" if v else "fail") for name in names
    ]


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


def write_wide_csv(
    names: Sequence[str],
    rows: Iterable[Sequence[Any]],
    out: TextIO,
    *,
    escape_formulas: bool = True,
) -> int:
    """A header of column names, then one line per wide row: lists, objects and booleans as
    compact JSON, a missing value as an empty cell; with ``escape_formulas`` text cells
    (and names) a spreadsheet would run are neutralized as in :func:`write_csv`."""
    writer = _CsvWriter(out)
    safe = neutralize_formula if escape_formulas else _as_is
    writer.writerow([safe(name) for name in names])
    count = 0
    with _strict() as at:
        for row in rows:
            at.key = row[0] if row else None
            writer.writerow([_wide_cell(v, safe) for v in row])
            count += 1
    return count


#: What starts a formula in Excel, LibreOffice or Google Sheets (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def neutralize_formula(cell: str) -> str:
    """``cell`` with a leading ``'`` when a spreadsheet would read it as a formula: it
    starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (OWASP's advice).
    A plain number (``-5``, ``+1.5e3``) runs nothing and is kept as it is."""
    if cell[:1] in FORMULA_STARTS and _PLAIN_NUMBER.fullmatch(cell) is None:
        return "'" + cell
    return cell


def _as_is(cell: str) -> str:
    return cell


class _CsvWriter:
    """``csv.writer`` with ``\\n`` line ends that also quotes a cell holding a carriage
    return: the csv module quotes only the line terminator's characters, and an unquoted
    CR splits the row for every reader. Such a row is written with every cell quoted."""

    def __init__(self, out: TextIO) -> None:
        self._plain = csv.writer(out, lineterminator="\n")
        self._quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)

    def writerow(self, row: Sequence[Any]) -> None:
        for cell in row:
            if isinstance(cell, str) and "\r" in cell:
                self._quoted.writerow(row)
                return
        self._plain.writerow(row)


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
        raise StoreError(
            f"{where}a stored value holds {exc.flaw}, which strict JSON cannot "
            "hold; the export stopped",
            hint="an earlier agac stored it; answer the record again "
            "(agac retry, or agac run --fresh)",
        ) from exc


def write_parquet(
    table: ResultTable, row_groups: Iterable[Sequence[Sequence[Any]]], out: IO[bytes]
) -> int:
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


EXPORT_FORMATS = ("jsonl", "csv", "parquet")
_FORMAT_OF_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}


def export_format(given: str | None, out: str | None, default: str = "jsonl") -> str:
    """The format of an export: ``given`` (``--format``), else what the extension of
    ``out`` says (``.jsonl``/``.ndjson``, ``.csv``, ``.parquet``; any case), else
    ``default``. UsageError when ``given`` contradicts the extension: a parquet name over
    JSONL bytes would mislead every reader of the file."""
    if given is not None and given not in EXPORT_FORMATS:
        raise UsageError(f"format {given!r} is not one of {', '.join(EXPORT_FORMATS)}")
    named = _FORMAT_OF_SUFFIX.get(_suffix(out)) if out else None
    if given is not None and named is not None and given != named:
        raise UsageError(
            f"--format {given} contradicts --out {out}, whose name says {named}",
            hint=f"drop --format (the name says {named}), or name the file for {given}",
        )
    return given or named or default


def _suffix(out: str) -> str:
    name = out.rstrip("/").rpartition("/")[2]
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


@contextlib.contextmanager
def open_output(
    path: str | None, protected: Iterable[Protected] = (), options: Mapping[str, Any] | None = None
) -> Iterator[TextIO]:
    """Yield the text stream an export writes to: stdout when ``path`` is None.

    How a file is written depends on what ``path`` names (X1):

    - a symlink is followed: what follows applies to the file it points to, and the link
      stays as it is;
    - a regular file, or nothing yet, is written to a temporary sibling and moved into
      place when the block ends without an error, so a failed export never leaves a
      half-written file (nor clobbers an earlier one); missing parent folders are created;
    - anything else that is not a folder — a FIFO, a device such as ``/dev/null`` — is
      opened and written, never replaced;
    - a folder is refused (UsageError) before anything is read, and so is a path that
      names one of ``protected`` (the store's files, a workflow's inputs:
      :class:`~agac.errors.ProtectedFile`);
    - an object URL is uploaded (``options``: ``object_options:``), as the module
      docstring says.
    """
    if path is None:
        yield sys.stdout
        sys.stdout.flush()
        return
    if is_cloud_url(path):
        with _uploading(path, options, "results.jsonl") as sink:
            text = io.TextIOWrapper(io.BufferedWriter(sink, 1 << 20), encoding="utf-8", newline="")
            yield text
            text.flush()
        return
    target, special = _target(Path(path), "results.jsonl", protected)
    if special:
        with target.open("w", encoding="utf-8", newline="") as handle:
            yield handle
        return
    with _replacing(target) as tmp, tmp.open("x", encoding="utf-8", newline="") as handle:
        yield handle


@contextlib.contextmanager
def open_binary_output(
    path: str, protected: Iterable[Protected] = (), options: Mapping[str, Any] | None = None
) -> Iterator[IO[bytes]]:
    """As :func:`open_output`, for a binary file (parquet); a path is required."""
    if is_cloud_url(path):
        with _uploading(path, options, "results.parquet") as sink:
            yield sink
        return
    target, special = _target(Path(path), "results.parquet", protected)
    if special:
        with target.open("wb") as handle:
            yield handle
        return
    with _replacing(target) as tmp, tmp.open("xb") as handle:
        yield handle


class _Sink(io.RawIOBase):
    """An upload as a binary file that knows its position (pyarrow asks ``tell``)."""

    def __init__(self, writer: Any, url: str) -> None:
        self._writer = writer
        self._url = url
        self._at = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def write(self, data: Any) -> int:
        with _upload_errors(self._url):
            self._writer.write(bytes(data))
        self._at += len(data)
        return len(data)

    def close(self) -> None:  # the upload is completed (or aborted) by _uploading, not here
        super().close()


@contextlib.contextmanager
def _upload_errors(url: str) -> Iterator[None]:
    from obstore import exceptions as ox

    try:
        yield
    except (ox.PermissionDeniedError, ox.UnauthenticatedError) as exc:
        raise ExportFailed(
            f"cannot write {url}: access refused ({_first_line(exc)}); nothing "
            "was written under that name",
            hint="give agac credentials that may "
            "write there (AWS_*, GOOGLE_*, AZURE_* or object_options)",
        ) from exc
    except (ox.BaseError, OSError) as exc:
        raise ExportFailed(
            f"cannot write {url} ({_first_line(exc)}); nothing was written under that name",
            hint="check the bucket, the endpoint and the network, then export again",
        ) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextlib.contextmanager
def _uploading(
    url: str, options: Mapping[str, Any] | None, example: str, part_bytes: int = PART_BYTES
) -> Iterator[IO[bytes]]:
    """A multipart upload to ``url``: completed when the block ends without an error,
    aborted (no object under the name) when it raises."""
    scheme, _, rest = url.partition("://")
    bucket, _, key = rest.partition("/")
    if not key or key.endswith("/"):
        raise UsageError(
            f"{url} names a prefix, not an object to write",
            hint=f"name the object, e.g. {url.rstrip('/')}/{example}",
        )
    ob = require_obstore(f"the export to {url}")
    with _upload_errors(url):
        store = open_cloud_store(f"{scheme}://{bucket}", options, f"the export to {url}")
        writer = ob.open_writer(
            store, key, buffer_size=part_bytes, max_concurrency=_PARTS_IN_FLIGHT
        )
    sink = _Sink(writer, url)
    # obstore's writer aborts the upload when its block raises, completes it otherwise.
    with _upload_errors(url), writer:
        yield sink  # type: ignore[misc]


def _target(path: Path, example: str, protected: Iterable[Protected]) -> tuple[Path, bool]:
    """The file ``path`` writes to (symlinks followed) and whether it is a special file
    (a FIFO, a device, a pipe behind ``/dev/stdout``: written in place, through ``path``
    itself); refused when it is a folder or protected."""
    target = Path(os.path.realpath(path))
    for guarded in protected:
        if _same_file(target, guarded.path):
            via = "" if target == Path(os.path.abspath(path)) else f" (through a link, {target})"
            raise ProtectedFile(
                f"refusing to write {path}: it is {guarded.what}{via}",
                hint="write the export to another file",
            )
    try:
        # Stat what opening ``path`` reaches: /dev/stdout into a pipe is a FIFO, though
        # its resolved name (/proc/…/fd/pipe:[N]) names nothing.
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(
            f"{path} is a folder, not a file", hint=f"name the file to write, e.g. {path / example}"
        )
    if mode is not None and not stat.S_ISREG(mode):
        return path, True  # opened by the name given: the kernel follows the link itself
    return target, False


def _same_file(target: Path, guarded: Path) -> bool:
    if target == Path(os.path.realpath(guarded)):
        return True
    try:
        return os.path.samefile(target, guarded)  # a hard link to it, too
    except OSError:
        return False


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[Path]:
    """A temporary sibling of the regular file ``target``, moved onto it when the block
    succeeds."""
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


def _wide_cell(value: Any, safe: Callable[[str], str]) -> Any:
    if value is None:
        return ""
    if isinstance(value, list | dict | bool):
        return _compact(value)
    return safe(value) if isinstance(value, str) else value


def _compact(value: Any) -> str:
    return strict_dumps(value, separators=(",", ":"))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _compact(value)
