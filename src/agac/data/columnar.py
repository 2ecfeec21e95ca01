"""Parquet and Arrow IPC input files, read by record batches of the columns asked for.

A parquet file is opened by its footer (schema, row groups) and read row group by row
group, only the columns a workflow reads (:mod:`agac.data.projection`); an Arrow IPC file
(``.arrow``, ``.feather``, a Hugging Face dataset's shards — which are IPC *streams*) is
read batch by batch with the same projection. Nothing reads a whole file: memory is
bounded by one row group (parquet) or one record batch (Arrow) of the columns read.

Values become JSON as :mod:`agac.data.arrowjson` documents. Rows are records in file
order, keyed ``<file>:<row>`` (1-based) or by ``id_field``.

A file whose footer (or IPC header) cannot be read, and a column read whose type has no
JSON form, are refused before the first record with a ConfigError naming the file
(``input_unreadable``, ``unsupported_column``): there is no line to fail on its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agac.data.arrow import require
from agac.data.arrowjson import json_values, unsupported
from agac.data.blocks import RecordBlock, block_of
from agac.data.files import InputChanged, InputFile
from agac.data.records import INPUT_CHANGED, InputRecord, changed_record, key_of, record_of
from agac.errors import ConfigError, Problem

__all__ = ["ColumnarFile", "open_columnar", "read_columnar", "read_columnar_blocks"]

_BATCH_ROWS = 65_536
_BATCH_VALUES = 500_000
"""Values (rows × columns) turned into Python objects at a time: a wide read takes fewer
rows a batch, so memory stays bounded by the batch, not by the table's width."""
_IPC_MAGIC = b"ARROW1"


@dataclass
class ColumnarFile:
    """An opened columnar file: its Arrow schema and, when the footer says, its rows."""

    file: InputFile
    kind: str
    """``parquet``, ``ipc-file`` or ``ipc-stream``."""
    schema: Any
    num_rows: int | None
    parquet: Any = None
    source: Any = None
    """The handle the footer was read from (closed by :meth:`close`)."""

    @property
    def names(self) -> list[str]:
        return list(self.schema.names)

    def batches(self, columns: Sequence[str]) -> Iterator[Any]:
        """Record batches of ``columns`` (in schema order), in file order: parquet one
        row group at a time (never pre-buffering the whole file), Arrow batch by batch."""
        pa = require("pyarrow")
        rows = max(1024, min(_BATCH_ROWS, _BATCH_VALUES // max(1, len(columns))))
        if self.kind == "parquet":
            for group in range(self.parquet.num_row_groups):
                yield from self.parquet.iter_batches(
                    batch_size=rows, row_groups=[group], columns=list(columns)
                )
            return
        wanted = [self.schema.get_field_index(c) for c in columns]
        options = pa.ipc.IpcReadOptions(included_fields=wanted)
        source = _reopened(self.file, self.source)
        try:
            if self.kind == "ipc-file":
                reader = pa.ipc.open_file(source, options=options)
                for i in range(reader.num_record_batches):
                    yield from _chunks(reader.get_batch(i), rows)
            else:
                for batch in pa.ipc.open_stream(source, options=options):
                    yield from _chunks(batch, rows)
        finally:
            if source is not self.source:
                _close(source)

    def close(self) -> None:
        if self.parquet is not None:
            self.parquet.close()
        _close(self.source)


def _chunks(batch: Any, rows: int) -> Iterator[Any]:
    """``batch`` in slices of at most ``rows`` rows (zero-copy)."""
    for start in range(0, batch.num_rows, rows):
        yield batch.slice(start, rows)


def _reopened(file: InputFile, source: Any) -> Any:
    """``source`` rewound when it is a file object (read again from the start), else a
    new handle of ``file``."""
    if source is not None and not isinstance(source, str):
        source.seek(0)
        return source
    return file.open_columnar()


def _close(source: Any) -> None:
    if source is not None and not isinstance(source, str):
        source.close()


def open_columnar(file: InputFile) -> ColumnarFile:
    """Open ``file`` by its footer or header only (no rows are read): ConfigError
    ``input_unreadable`` naming it when that fails; InputChanged from an object that is
    not the version listed."""
    pa = require("pyarrow")
    source = file.open_columnar()
    try:
        if file.format.kind == "parquet":
            pq = require("pyarrow.parquet")
            handle = pq.ParquetFile(source, pre_buffer=False)
            return ColumnarFile(
                file, "parquet", handle.schema_arrow, handle.metadata.num_rows, handle, source
            )
        if _is_ipc_file(source):
            reader = pa.ipc.open_file(source)
            return ColumnarFile(file, "ipc-file", reader.schema, None, None, source)
        stream = pa.ipc.open_stream(source)
        return ColumnarFile(file, "ipc-stream", stream.schema, None, None, source)
    except InputChanged:
        _close(source)
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        _close(source)
        raise unreadable(file, exc) from exc


def _is_ipc_file(source: Any) -> bool:
    if isinstance(source, str):
        with open(source, "rb") as handle:
            return handle.read(6) == _IPC_MAGIC
    start = source.read(6)
    source.seek(0)
    return bool(start == _IPC_MAGIC)


def unreadable(file: InputFile, exc: BaseException) -> ConfigError:
    what = "parquet" if file.format.kind == "parquet" else "Arrow IPC"
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ConfigError(
        problems=[
            Problem(
                "input_unreadable",
                f"{file.where} is not a readable {what} file ({detail})",
                file.where,
                0,
                path="input.path",
                hint=f"its {'footer' if what == 'parquet' else 'header'} is damaged or the file was cut "
                "off: write it again, or move it out of the input; input.format: names the "
                "format when the extension does not",
            )
        ]
    )


def projected(
    names: Sequence[str], columns: frozenset[str] | None, id_field: str | None
) -> list[str]:
    """The columns to read, in schema order: all when ``columns`` is None, else those of
    ``columns`` (and ``id_field``) the file has."""
    if columns is None:
        return list(names)
    wanted = columns | ({id_field} if id_field else set())
    return [n for n in names if n in wanted]


def check_types(opened: ColumnarFile, columns: Sequence[str]) -> None:
    """ConfigError ``unsupported_column`` when a column read has no JSON form."""
    for name in columns:
        why = unsupported(opened.schema.field(name).type)
        if why is not None:
            raise ConfigError(
                problems=[
                    Problem(
                        "unsupported_column",
                        f"{opened.file.where}: column {name!r} is {why}, which has no JSON form",
                        opened.file.where,
                        0,
                        path="input.path",
                        hint=f"leave source.{name} out of what the workflow reads, or cast the "
                        "column (to text, a number or a struct) when the file is written",
                    )
                ]
            )


def read_columnar(
    file: InputFile, id_field: str | None, columns: frozenset[str] | None, name: str
) -> Iterator[InputRecord]:
    """Every row of ``file`` as a record (see the module docstring)."""
    for item in _read(file, id_field, columns, name, bulk=False):
        assert isinstance(item, InputRecord)
        yield item


def read_columnar_blocks(
    file: InputFile, id_field: str | None, columns: frozenset[str] | None, name: str
) -> Iterator[InputRecord | RecordBlock]:
    """The records of :func:`read_columnar`, a batch at a time as a
    :class:`~agac.data.blocks.RecordBlock` where it can be one (the same keys, positions
    and payload text), else one by one."""
    return _read(file, id_field, columns, name, bulk=True)


def _read(
    file: InputFile, id_field: str | None, columns: frozenset[str] | None, name: str, *, bulk: bool
) -> Iterator[InputRecord | RecordBlock]:
    try:
        opened = open_columnar(file)
    except InputChanged as exc:
        yield changed_record(name, 1, exc)
        return
    names = projected(opened.names, columns, id_field)
    try:
        check_types(opened, names)
    except ConfigError:
        opened.close()
        raise
    yield from _rows(opened, names, id_field, name, bulk)


def _rows(
    opened: ColumnarFile,
    names: list[str],
    id_field: str | None,
    name: str,
    bulk: bool,
) -> Iterator[InputRecord | RecordBlock]:
    pa = require("pyarrow")
    n = 0
    try:
        for batch in opened.batches(names):
            block = block_of(batch, name, n, id_field) if bulk else None
            if block is not None:
                yield block
                n += batch.num_rows
                continue
            if not names:  # nothing read but the row count
                for _ in range(batch.num_rows):
                    n += 1
                    yield record_of(name, n, 0, {}, id_field, "row")
                continue
            values = [json_values(batch.column(i)) for i in range(batch.num_columns)]
            yield from _batch_records(name, n, batch.schema.names, values, id_field)
            n += batch.num_rows
    except InputChanged as exc:
        yield from _rest_changed(opened, name, n, exc)
    except (pa.ArrowException, OSError) as exc:
        raise unreadable(opened.file, exc) from exc
    finally:
        opened.close()


def _batch_records(
    name: str, before: int, names: list[str], values: list[list[Any]], id_field: str | None
) -> Iterator[InputRecord]:
    """One record per row of a batch whose columns' JSON values are ``values``."""
    if id_field is None or id_field not in names:
        for offset, row in enumerate(zip(*values, strict=True), start=before + 1):
            yield record_of(name, offset, 0, dict(zip(names, row, strict=True)), id_field, "row")
        return
    for offset, row in enumerate(zip(*values, strict=True), start=before + 1):
        payload = dict(zip(names, row, strict=True))
        key = key_of(payload[id_field])
        if key is None:
            yield record_of(name, offset, 0, payload, id_field, "row")
        else:
            yield InputRecord(name, offset, 0, key, payload)


def _rest_changed(
    opened: ColumnarFile,
    name: str,
    n: int,
    exc: InputChanged,
) -> Iterator[InputRecord]:
    """The rows not read of an object that changed: one ``input_changed`` record per row
    the footer counts, else one for the rest of the file."""
    if opened.num_rows is None or opened.num_rows <= n:
        yield changed_record(name, n + 1, exc)
        return
    for row in range(n + 1, opened.num_rows + 1):
        yield InputRecord(
            name,
            row,
            0,
            f"{name}:{row}",
            None,
            f"{name} row {row}: not read: {exc}; `agac run WF --new` takes the input as it is now",
            INPUT_CHANGED,
        )
