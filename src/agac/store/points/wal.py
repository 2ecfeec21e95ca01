"""SQLite's write-ahead log, as far as shipping it needs: headers, frames, commits.

A WAL file is a 32-byte header (magic, format, page size, checkpoint sequence, two salts,
a checksum) followed by frames of a 24-byte header and one page. A frame whose "database
size" field is not zero ends a commit. Each reset of the log (a TRUNCATE checkpoint, or
SQLite restarting it) writes new salts: frames carry the salts of their log, and SQLite
ignores, on recovery, every frame from the first whose salts or chained checksum do not
match. So a byte range of the log that starts at the header and ends at a commit frame
restores exactly the commits in it, and a range cut short (a torn segment) restores the
complete commits before the cut.

A *segment* is one such range, shipped as an object: a small header (magic, the range's
start offset and length), the WAL bytes, and the SHA-256 of both, so a truncated or
altered object is recognized without asking SQLite (O3).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

__all__ = [
    "SEGMENT_MAGIC",
    "TornSegment",
    "WalHeader",
    "commit_end",
    "decode_segment",
    "encode_segment",
    "read_header",
]

WAL_HEADER = 32
FRAME_HEADER = 24
_MAGICS = (0x377F0682, 0x377F0683)
SEGMENT_MAGIC = b"AGACWAL1"
_SEGMENT_HEAD = struct.Struct(">8sQQ")


class TornSegment(Exception):
    """A segment object whose length or checksum does not match: the log ends before it."""


@dataclass(frozen=True)
class WalHeader:
    page_size: int
    checkpoint_seq: int
    salt: bytes
    """The 8 salt bytes: they change at every reset of the log (a new generation)."""

    @property
    def frame_size(self) -> int:
        return FRAME_HEADER + self.page_size


def read_header(data: bytes) -> WalHeader | None:
    """The header of a WAL file's first 32 bytes, or None (absent, empty, not a WAL)."""
    if len(data) < WAL_HEADER:
        return None
    magic, _fmt, page_size, seq = struct.unpack_from(">IIII", data, 0)
    if magic not in _MAGICS or page_size < 512 or page_size & (page_size - 1):
        return None
    return WalHeader(page_size, seq, bytes(data[16:24]))


def commit_end(data: bytes, base: int, header: WalHeader) -> int:
    """The file offset just past the last commit frame in ``data`` (the file's bytes from
    offset ``base``, a frame boundary or 0), or ``base`` when no commit is complete in it.

    Frames after the last commit are either a transaction still being written or, after
    a rollback, frames SQLite will overwrite: neither may be shipped."""
    size = header.frame_size
    pos = WAL_HEADER if base == 0 else base
    end = base
    limit = base + len(data)
    while pos + size <= limit:
        at = pos - base
        if data[at + 8 : at + 16] != header.salt:
            break
        if struct.unpack_from(">I", data, at + 4)[0]:
            end = pos + size
        pos += size
    return end


def encode_segment(start: int, wal_bytes: bytes) -> bytes:
    head = _SEGMENT_HEAD.pack(SEGMENT_MAGIC, start, len(wal_bytes))
    digest = hashlib.sha256(head)
    digest.update(wal_bytes)
    return b"".join((head, wal_bytes, digest.digest()))


def decode_segment(body: bytes, start: int) -> bytes:
    """The WAL bytes of a segment that must begin at file offset ``start``; TornSegment
    when the object is short, altered, or not the range expected."""
    if len(body) < _SEGMENT_HEAD.size + 32:
        raise TornSegment(f"{len(body)} bytes, shorter than a segment's header")
    magic, at, length = _SEGMENT_HEAD.unpack_from(body, 0)
    if magic != SEGMENT_MAGIC:
        raise TornSegment("not a segment (its magic is wrong)")
    if len(body) != _SEGMENT_HEAD.size + length + 32:
        raise TornSegment(
            f"{len(body)} bytes where its header says {_SEGMENT_HEAD.size + length + 32}"
        )
    digest = hashlib.sha256(memoryview(body)[:-32]).digest()
    if digest != body[-32:]:
        raise TornSegment("its checksum does not match its bytes")
    if at != start:
        raise TornSegment(f"it starts at WAL offset {at}, the log expects {start}")
    return body[_SEGMENT_HEAD.size : -32]
