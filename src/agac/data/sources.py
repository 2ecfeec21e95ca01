"""Where a run's records come from: input files, or records given in memory (docs/python.md).

A :class:`RecordSource` yields :class:`~agac.data.readers.InputRecord` values in order,
with unique keys, and names its content (:meth:`~RecordSource.identity`) so that a run
snapshotting it at admission knows whether a later call brings the same records:

- :class:`FileSource` — the files ``input.path`` names; keys ``<file name>:<n>``;
- :class:`TableSource` — records given to ``agac.run(records=…)`` (dicts, pandas, polars,
  Arrow), spooled to JSON lines by :func:`~agac.data.frames.spool_records`; one input
  named ``records``, keys ``records:<n>`` (1-based) without an ``id_field``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agac.data.frames import RECORDS_NAME, RecordsSpool
from agac.data.readers import InputRecord, file_fingerprint, iter_input, read_records, unique_keys

__all__ = ["FileSource", "RecordSource", "TableSource"]


class RecordSource(Protocol):
    """A run's records, read in order (streaming), with unique keys."""

    @property
    def label(self) -> str:
        """What messages call the source (``data/reviews/``, ``records``)."""
        ...

    def identity(self) -> str:
        """Text that changes exactly when the records change (hashed into the snapshot id)."""
        ...

    def records(self, id_field: str | None) -> Iterator[InputRecord]:
        ...


@dataclass(frozen=True)
class FileSource:
    """Input files, in the order they are admitted (one file is one unit of batching)."""

    paths: Sequence[Path]
    label: str = "input.path"

    def identity(self) -> str:
        return "".join(f"\x1e{path.name}\x1f{file_fingerprint(path)}" for path in self.paths)

    def records(self, id_field: str | None) -> Iterator[InputRecord]:
        return iter_input(self.paths, id_field)


@dataclass(frozen=True)
class TableSource:
    """Records given in memory, spooled: the input named ``records``."""

    spool: RecordsSpool
    label: str = RECORDS_NAME

    def identity(self) -> str:
        return f"\x1e{RECORDS_NAME}\x1f{self.spool.digest}"

    def records(self, id_field: str | None) -> Iterator[InputRecord]:
        return unique_keys(read_records(self.spool.path, id_field, name=RECORDS_NAME))
