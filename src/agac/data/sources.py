"""Where a run's records come from: input files, or records given in memory (docs/python.md).

A :class:`RecordSource` yields :class:`~agac.data.readers.InputRecord` values in order,
with unique keys, and names its content (:meth:`~RecordSource.identity`) so that a run
snapshotting it at admission knows whether a later call brings the same records:

- :class:`FileSource` — the files ``input.path`` names; keys ``<file name>:<n>``;
- :class:`ObjectSource` — the objects an ``s3://``, ``gs://`` or ``az://`` input names,
  as listed (ETag, version, size): its identity is the listing, so a run over them can
  tell, without reading them, that they changed (:meth:`ObjectSource.changes`);
- :class:`TableSource` — records given to ``agac.run(records=…)`` (dicts, pandas, polars,
  Arrow), spooled to JSON lines by :func:`~agac.data.frames.spool_records`; one input
  named ``records``, keys ``records:<n>`` (1-based) without an ``id_field``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agac.data.blocks import RecordBlock
from agac.data.files import InputChanged, InputFile, LocalFile
from agac.data.formats import format_of
from agac.data.frames import RECORDS_NAME, RecordsSpool
from agac.data.objects import Bucket, ObjectEntry, ObjectFile
from agac.data.readers import (
    InputRecord,
    file_fingerprint,
    read_input,
    read_input_blocks,
    read_records,
    unique_keys,
    unique_record_keys,
)

__all__ = ["FileSource", "ObjectSource", "RecordSource", "TableSource"]


class RecordSource(Protocol):
    """A run's records, read in order (streaming), with unique keys."""

    @property
    def label(self) -> str:
        """What messages call the source (``data/reviews/``, ``records``)."""
        ...

    def identity(self) -> str:
        """Text that changes exactly when the records change (hashed into the snapshot id)."""
        ...

    def records(self, id_field: str | None) -> Iterator[InputRecord]: ...


@dataclass(frozen=True)
class FileSource:
    """Input files, in the order they are admitted (one file is one unit of batching).

    ``format`` is ``input.format:`` (None: each file's extension says); ``columns`` the
    top-level fields a columnar file is read for (None: all of them). Both enter the
    identity when set, so a snapshot of other columns is another snapshot."""

    paths: Sequence[Path]
    label: str = "input.path"
    format: str | None = None
    columns: frozenset[str] | None = None

    def files(self) -> list[LocalFile]:
        found = []
        for path in self.paths:
            fmt = format_of(path.name, self.format)
            if fmt is None:
                raise ValueError(f"{path.name}: unsupported input file type {path.suffix!r}")
            found.append(LocalFile(path, fmt))
        return found

    def identity(self) -> str:
        text = "".join(f"\x1e{path.name}\x1f{file_fingerprint(path)}" for path in self.paths)
        return text + _reading(
            self.format, self.columns, any(f.format.columnar for f in self.files())
        )

    def records(self, id_field: str | None) -> Iterator[InputRecord]:
        return unique_keys(
            r for file in self.files() for r in read_input(file, id_field, columns=self.columns)
        )

    def blocks(self, id_field: str | None) -> Iterator[InputRecord | RecordBlock]:
        """:meth:`records`, a columnar file's batches as blocks where they can be (their
        keys not yet checked against the others')."""
        return unique_record_keys(
            r
            for file in self.files()
            for r in read_input_blocks(file, id_field, columns=self.columns)
        )

    def check(self, id_field: str | None) -> None:
        """Refuse, before a row is read, a columnar file that cannot be read or whose
        columns read have no JSON form (ConfigError naming it)."""
        check_columnar(self.files(), self.columns, id_field)


def check_columnar(
    files: Sequence[InputFile], columns: frozenset[str] | None, id_field: str | None
) -> None:
    """Open each columnar file's footer and check the types of the columns it is read for:
    ConfigError (``input_unreadable``, ``unsupported_column``) naming the first that fails.
    An object changed since it was listed is left to the read (``input_changed``)."""
    from agac.data.columnar import check_types, open_columnar, projected

    for file in files:
        if not file.format.columnar:
            continue
        try:
            opened = open_columnar(file)
        except InputChanged:
            continue
        try:
            check_types(opened, projected(opened.names, columns, id_field))
        finally:
            opened.close()


def _reading(format: str | None, columns: frozenset[str] | None, columnar: bool) -> str:
    """What of the identity says how the files are read (empty as before both existed)."""
    text = f"\x1dformat={format}" if format else ""
    if columnar and columns is not None:
        text += "\x1dcolumns=" + "\x1f".join(sorted(columns))
    return text


@dataclass(frozen=True)
class ObjectSource:
    """Objects in object storage, as listed, in key order (one object is one unit of
    batching, like a file)."""

    bucket: Bucket
    entries: tuple[ObjectEntry, ...]
    label: str = "input.path"
    format: str | None = None
    columns: frozenset[str] | None = None

    def identity(self) -> str:
        text = "".join(f"\x1e{e.url}\x1f{e.etag}\x1f{e.version}\x1f{e.size}" for e in self.entries)
        return text + _reading(
            self.format, self.columns, any(e.format.columnar for e in self.entries)
        )

    def records(self, id_field: str | None) -> Iterator[InputRecord]:
        return unique_keys(
            r
            for e in self.entries
            for r in read_input(ObjectFile(self.bucket, e), id_field, columns=self.columns)
        )

    def blocks(self, id_field: str | None) -> Iterator[InputRecord | RecordBlock]:
        """As :meth:`FileSource.blocks`, each object read at the version listed."""
        return unique_record_keys(
            r
            for e in self.entries
            for r in read_input_blocks(ObjectFile(self.bucket, e), id_field, columns=self.columns)
        )

    def check(self, id_field: str | None) -> None:
        """As :meth:`FileSource.check`, one ranged read of each columnar object's footer."""
        check_columnar([ObjectFile(self.bucket, e) for e in self.entries], self.columns, id_field)

    def facts(self) -> dict[str, dict[str, object]]:
        """Each object's URL, ETag, version and size, by the name records carry."""
        return {e.name: e.facts() for e in self.entries}

    def changes(self, stored: Sequence[Mapping[str, Any]]) -> list[str]:
        """How the objects differ from those a snapshot recorded (``stored``: its files),
        one phrase per object, naming it."""
        now = {e.url: e for e in self.entries}
        found = []
        for old in stored:
            url = old.get("object")
            if not url:
                continue
            entry = now.pop(str(url), None)
            if entry is None:
                found.append(f"{url} is gone")
            elif (entry.etag, entry.version, entry.size) != (
                old.get("etag"),
                old.get("version"),
                old.get("size"),
            ):
                found.append(
                    f"{url} changed (ETag {old.get('etag')} -> {entry.etag}, size "
                    f"{old.get('size')} -> {entry.size})"
                )
        found.extend(
            f"{url} is new" for url in now if not any(f.get("object") == url for f in stored)
        )
        return found


@dataclass(frozen=True)
class TableSource:
    """Records given in memory, spooled: the input named ``records``."""

    spool: RecordsSpool
    label: str = RECORDS_NAME

    def identity(self) -> str:
        return f"\x1e{RECORDS_NAME}\x1f{self.spool.digest}"

    def records(self, id_field: str | None) -> Iterator[InputRecord]:
        return unique_keys(read_records(self.spool.path, id_field, name=RECORDS_NAME))
