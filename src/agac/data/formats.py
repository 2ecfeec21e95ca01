"""Input formats: what an input file's name (or ``input.format:``) says it holds.

Row formats — ``jsonl``, ``json`` (an array of objects), ``csv`` — are read as a stream
of bytes and may be compressed: a last extension ``.gz``, ``.zst``, ``.bz2`` or ``.xz``
says how (``reviews.jsonl.gz``). Columnar formats — ``parquet`` and ``arrow`` (Arrow IPC,
file or stream: ``.arrow``, ``.feather``, the shards of a Hugging Face dataset) — carry
their own compression inside and are read by record batches.

``input.format:`` names the format when the extension does not (``part-0000`` files of
a job, ``dump.gz``); compression still follows the last extension. Matching is
case-insensitive.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib
from dataclasses import dataclass
from typing import IO, Any, Literal

from agac.errors import UsageError
from agac.installing import install_hint

__all__ = [
    "COLUMNAR",
    "COMPRESSIONS",
    "FORMATS",
    "SUFFIXES",
    "InputFormat",
    "decompressed",
    "format_of",
    "known_format",
]

Kind = Literal["jsonl", "json", "csv", "parquet", "arrow"]

FORMATS: tuple[str, ...] = ("jsonl", "json", "csv", "parquet", "arrow", "feather")
"""Values ``input.format:`` accepts (``feather`` is Arrow IPC)."""

COLUMNAR: frozenset[str] = frozenset({"parquet", "arrow"})

SUFFIXES: dict[str, Kind] = {
    ".jsonl": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
}
"""Extensions agac reads, lower-case, and the format each names."""

COMPRESSIONS: dict[str, str] = {".gz": "gzip", ".zst": "zstd", ".bz2": "bzip2", ".xz": "xz"}
"""Last extensions of a compressed row format, and the compression each names."""


@dataclass(frozen=True)
class InputFormat:
    """How one input file is read: its format, and the compression of a row format."""

    kind: Kind
    compression: str | None = None

    @property
    def columnar(self) -> bool:
        return self.kind in COLUMNAR

    def __str__(self) -> str:
        return self.kind + (f" ({self.compression})" if self.compression else "")


def _kind(name: str) -> Kind:
    return "arrow" if name == "feather" else name  # type: ignore[return-value]


def format_of(name: str, override: str | None = None) -> InputFormat | None:
    """The format of the file called ``name`` (``override``: ``input.format:``); None when
    neither names one agac reads. A columnar file never takes a compression extension."""
    lower = name.lower()
    compression = None
    for suffix, codec in COMPRESSIONS.items():
        if lower.endswith(suffix):
            compression, lower = codec, lower[: -len(suffix)]
            break
    if override is not None:
        kind = _kind(override.lower())
    else:
        dot = lower.rfind(".")
        found = SUFFIXES.get(lower[dot:]) if dot >= 0 else None
        if found is None:
            return None
        kind = found
    if kind in COLUMNAR and compression is not None:
        return None  # parquet and Arrow compress inside; a .parquet.gz cannot be read by batches
    return InputFormat(kind, compression)


def known_format(value: str) -> bool:
    return value.lower() in FORMATS


def _zstd(raw: IO[bytes]) -> IO[bytes]:
    try:
        import zstandard
    except ImportError as exc:
        raise UsageError(
            "zstandard is not installed; .zst inputs need the data extra: " + install_hint("data")
        ) from exc
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)


def _codec(compression: str, raw: IO[bytes]) -> Any:
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "bzip2":
        return bz2.BZ2File(raw, mode="rb")
    if compression == "xz":
        return lzma.LZMAFile(raw, mode="rb")
    return _zstd(raw)


def decompressed(raw: IO[bytes], compression: str | None) -> IO[bytes]:
    """``raw``'s bytes decompressed as ``compression`` says (None: as they are), buffered.
    A damaged or cut-off stream raises OSError from ``read``, whatever the codec."""
    if compression is None:
        return raw
    errors: tuple[type[BaseException], ...] = (EOFError, lzma.LZMAError, zlib.error)
    if compression == "zstd":
        import zstandard

        errors = (*errors, zstandard.ZstdError)
    # Small reads: a damaged stream loses at most the last 64 KiB read before the damage.
    return io.BufferedReader(_Translated(_codec(compression, raw), errors), 1 << 16)


class _Translated(io.RawIOBase):
    """A decompressing stream whose codec errors are OSError (one kind of "damaged")."""

    def __init__(self, inner: IO[bytes], errors: tuple[type[BaseException], ...]) -> None:
        self._inner = inner
        self._errors = errors

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            return self._inner.readinto(buffer)  # type: ignore[attr-defined, no-any-return]
        except OSError:
            raise
        except self._errors as exc:
            raise OSError(str(exc) or type(exc).__name__) from exc

    def close(self) -> None:
        self._inner.close()
        super().close()
