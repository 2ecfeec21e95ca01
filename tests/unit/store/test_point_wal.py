"""Cutting SQLite's WAL at commits and packing segments (O1, O3), on WAL files SQLite wrote."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agac.store.points.wal import (
    TornSegment,
    commit_end,
    decode_segment,
    encode_segment,
    read_header,
)


def _wal_with_commits(tmp_path: Path, commits: int) -> tuple[Path, bytes]:
    db = tmp_path / "a.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for i in range(commits):
        conn.execute("INSERT INTO t VALUES (?)", (i,))
    data = (tmp_path / "a.db-wal").read_bytes()
    snapshot = conn.serialize()
    conn.close()
    (tmp_path / "snap.db").write_bytes(snapshot)
    return tmp_path / "snap.db", data


def test_o1_commit_end_cuts_after_the_last_complete_commit(tmp_path: Path) -> None:
    _snap, wal = _wal_with_commits(tmp_path, 3)
    header = read_header(wal)
    assert header is not None
    assert commit_end(wal, 0, header) == len(wal)  # each insert is one commit frame
    # a commit still being written (its frame cut short) is not shipped
    assert commit_end(wal[:-100], 0, header) == len(wal) - header.frame_size
    # from a later offset, the same cut
    second = 32 + header.frame_size
    assert commit_end(wal[second:], second, header) == len(wal)
    # frames of another generation (other salts) end the scan
    other = bytearray(wal)
    other[32 + header.frame_size + 8] ^= 0xFF
    assert commit_end(bytes(other), 0, header) == 32 + header.frame_size


def test_o3_segments_restore_exactly_the_commits_before_a_torn_one(tmp_path: Path) -> None:
    snap, wal = _wal_with_commits(tmp_path, 4)
    header = read_header(wal)
    assert header is not None
    cut = 32 + 2 * header.frame_size
    segments = [encode_segment(0, wal[:cut]), encode_segment(cut, wal[cut:])]
    assert decode_segment(segments[0], 0) == wal[:cut]
    with pytest.raises(TornSegment, match="bytes"):
        decode_segment(segments[1][:-10], cut)  # a truncated object
    with pytest.raises(TornSegment, match="offset"):
        decode_segment(segments[1], 0)  # not the range the log expects
    altered = bytearray(segments[1])
    altered[40] ^= 1
    with pytest.raises(TornSegment, match="checksum"):
        decode_segment(bytes(altered), cut)
    (tmp_path / "snap.db-wal").write_bytes(decode_segment(segments[0], 0))
    conn = sqlite3.connect(snap)
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    conn.close()
