"""O3: rebuild a working copy from a storage point's snapshot and the log ``head`` names.

The snapshot is written as the database file, then each WAL generation in turn is
written beside it as ``-wal``, opened, checkpointed and closed, so SQLite itself applies
the frames and checks their checksums (a pure-Python check would cost seconds per
100 MB). Every object is checked against its SHA-256 first: a missing, short or altered
segment ends the log there — the commits in the segments before it are restored, those
in it and after it are not, and the report says so.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from agac.errors import StoreError
from agac.store.points.head import Head, segment_key
from agac.store.points.objects import Objects
from agac.store.points.wal import TornSegment, decode_segment

__all__ = ["Restored", "restore", "wipe"]

DB_NAME = "agac.db"
_PARALLEL_READS = 8


@dataclass
class Restored:
    """What a restore applied: segments read, bytes, and where the log ended early."""

    segments: int = 0
    bytes: int = 0
    torn: list[str] = field(default_factory=list)


def wipe(folder: Path) -> None:
    """Remove a working copy (the database and its -wal/-shm), keeping the folder."""
    for name in (DB_NAME, DB_NAME + "-wal", DB_NAME + "-shm", DB_NAME + "-journal"):
        (folder / name).unlink(missing_ok=True)


def restore(objects: Objects, head: Head, folder: Path) -> Restored:
    """Make ``folder/agac.db`` the state ``head`` names. The folder's old copy is discarded."""
    folder.mkdir(parents=True, exist_ok=True)
    wipe(folder)
    db = folder / DB_NAME
    done = Restored()
    if head.snapshot is None:
        return done  # a point created but never snapshotted holds nothing yet
    snap = objects.get(head.snapshot.key)
    if snap is None:
        raise StoreError(
            f"the storage point {objects.where} names snapshot "
            f"{head.snapshot.key}, which is missing: the point was altered; "
            "restore it from a backup of the bucket"
        )
    if hashlib.sha256(snap.data).hexdigest() != head.snapshot.sha256:
        raise StoreError(
            f"snapshot {head.snapshot.key} of the storage point {objects.where} "
            "does not match its checksum: the point was altered"
        )
    tmp = folder / (DB_NAME + ".restoring")
    tmp.write_bytes(snap.data)
    os.replace(tmp, db)
    del snap
    with concurrent.futures.ThreadPoolExecutor(_PARALLEL_READS) as pool:
        for gen in head.log:
            keys = [segment_key(gen.id, n) for n in range(1, gen.segments + 1)]
            bodies = pool.map(objects.get, keys)
            wal = bytearray()
            for key, body in zip(keys, bodies):
                try:
                    if body is None:
                        raise TornSegment("it is missing")
                    wal += decode_segment(body.data, len(wal))
                except TornSegment as exc:
                    done.torn.append(f"segment {key} is torn ({exc}); the log ends before it")
                    break
                done.segments += 1
            done.bytes += len(wal)
            if wal:
                _apply(db, bytes(wal))
            if done.torn:
                break
    return done


def _apply(db: Path, wal: bytes) -> None:
    """Let SQLite apply one generation's frames to ``db`` (no connection is open on it)."""
    wal_path = Path(str(db) + "-wal")
    wal_path.write_bytes(wal)
    try:
        conn = sqlite3.connect(db, isolation_level=None)
        try:
            busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                raise StoreError(f"cannot apply the log to {db}: another process has it open")
        finally:
            conn.close()  # the last connection's close removes the -wal
    except sqlite3.Error as exc:
        raise StoreError(f"cannot apply the log to {db}: {exc}") from exc
    if wal_path.exists() and wal_path.stat().st_size:
        raise StoreError(f"the log applied to {db} was not checkpointed")
