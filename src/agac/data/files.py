"""One input file, wherever it lives: what the readers open.

An :class:`InputFile` has a ``name`` (what record keys and messages call it: the file's
name, or an object's key below its prefix), a ``where`` (the path or URL a message
shows), a :class:`~agac.data.formats.InputFormat`, and two ways to be read: its bytes as
a stream (row formats, decompressed by the reader) and a random-access handle for
pyarrow (columnar formats). :class:`LocalFile` is a file on disk; object storage has its
own (:mod:`agac.data.objects`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from agac.data.formats import InputFormat

__all__ = ["InputChanged", "InputFile", "LocalFile"]


class InputChanged(Exception):
    """An input object no longer is the version agac listed (its ETag, version or size
    moved): nothing more is read from it (reason ``input_changed``)."""

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(f"{where} changed since agac listed it ({detail})")
        self.where = where
        self.detail = detail


class InputFile(Protocol):
    """An input file as the readers see it (see the module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def where(self) -> str: ...

    @property
    def format(self) -> InputFormat: ...

    def open_bytes(self) -> IO[bytes]:
        """Its bytes as stored (still compressed), from the start; raises OSError, or
        InputChanged for an object that is not the version listed."""
        ...

    def open_columnar(self) -> Any:
        """What pyarrow opens: a path, or a seekable binary file."""
        ...


@dataclass(frozen=True)
class LocalFile:
    """A file on the local disk."""

    path: Path
    format: InputFormat
    display: str = ""
    """How messages show it (project-relative); its path when empty."""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def where(self) -> str:
        return self.display or str(self.path)

    def open_bytes(self) -> IO[bytes]:
        return self.path.open("rb")

    def open_columnar(self) -> Any:
        return str(self.path)
