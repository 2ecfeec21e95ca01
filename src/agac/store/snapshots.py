"""Input snapshots: a run's records, copied into the store at admission (docs/guarantees.md, The store)
(a part of :class:`agac.store.repository.Store`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agac.jsontext import dumps, loads
from agac.store import tables as t
from agac.store.core import StoreCore
from agac.store.rows import RecordRow, RecordSpan

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Row

__all__ = ["SnapshotRepository"]

_CHUNK = 2000
_INSERT = "INSERT INTO records (snapshot_id, seq, key, file, n, line, payload) VALUES "
_SPAN_ROWS = 200
"""Rows per SQLite statement of a span: one statement of 200 rows binds 800 values (under
every SQLite's limit) and costs about a third less CPU a row than one statement a row."""
_COPY = "COPY records (snapshot_id, seq, key, file, n, line, payload) FROM STDIN"


def _interleaved(span: RecordSpan, lo: int, hi: int) -> tuple[Any, ...]:
    """The values of records ``lo`` to ``hi`` of ``span`` bound in one statement: seq,
    key, position and payload of each record in turn (filled column by column)."""
    flat: list[Any] = [None] * (4 * (hi - lo))
    flat[0::4] = range(span.seq + lo, span.seq + hi)
    flat[1::4] = span.keys[lo:hi]
    flat[2::4] = range(span.n + lo, span.n + hi)
    flat[3::4] = span.payloads[lo:hi]
    return tuple(flat)


def _literal(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


class SnapshotRepository(StoreCore):
    def snapshot_complete(self, snapshot_id: str) -> bool:
        with self._read() as conn:
            row = conn.execute(
                sa.select(t.snapshots.c.complete).where(t.snapshots.c.id == snapshot_id)
            ).first()
        return bool(row and row.complete)

    def write_snapshot(
        self,
        snapshot_id: str,
        files: list[dict[str, Any]],
        rows: Iterable[RecordRow | RecordSpan | dict[str, Any]],
        attachments: Iterable[tuple[str, str, int, str]] = (),
        one_by_one: Callable[[], Iterable[RecordRow]] | None = None,
    ) -> int:
        """Store an input snapshot streaming, in chunks; returns its record count. Rows are
        :class:`RecordRow` values of this snapshot, dicts keyed by column name (given
        the snapshot's id here), or :class:`RecordSpan` runs of valid records, appended
        in bulk (one statement per span on SQLite, ``COPY`` on PostgreSQL).

        The keys of spans are checked once stored: when a key is found twice the records
        are written again from ``one_by_one()`` (the same records one by one, duplicates
        marked), in the same transaction, so a snapshot never holds a key twice whichever
        way it was written.

        Several processes admitting runs over the same input at once (S6) write it once:
        the first insert of the snapshot's row wins, and the others (on PostgreSQL, after
        waiting for the winner's transaction) find it complete, fill ``files`` from it and
        read none of ``rows``. A row left incomplete by an older agac is written again.
        ``attachments`` — (path, sha256, size, media type) of each file the records attach —
        are written with it."""
        s = t.snapshots
        with self._write("snapshot the input") as conn:
            inserted = conn.execute(
                self.hooks.insert(s)
                .values(
                    id=snapshot_id,
                    files=dumps(files),
                    record_count=0,
                    complete=False,
                    created_at=self.clock.time(),
                )
                .on_conflict_do_nothing(index_elements=["id"])
                .returning(s.c.id)
            ).first()
            if inserted is None:
                stored = conn.execute(sa.select(s).where(s.c.id == snapshot_id)).first()
                if stored is not None and stored.complete:
                    files[:] = loads(stored.files)
                    return int(stored.record_count)
            conn.execute(t.records.delete().where(t.records.c.snapshot_id == snapshot_id))
            sa_ = t.snapshot_attachments
            conn.execute(sa_.delete().where(sa_.c.snapshot_id == snapshot_id))
            files_rows = [
                {"snapshot_id": snapshot_id, "path": p, "sha256": h, "size": n, "media_type": m}
                for p, h, n, m in attachments
            ]
            for i in range(0, len(files_rows), _CHUNK):
                self._bulk(conn, sa_, files_rows[i : i + _CHUNK])
            count, unchecked = self._write_records(conn, snapshot_id, rows)
            if unchecked and one_by_one is not None and self._repeats_a_key(conn, snapshot_id):
                conn.execute(t.records.delete().where(t.records.c.snapshot_id == snapshot_id))
                count, _ = self._write_records(conn, snapshot_id, one_by_one())
            # ``files`` is filled by the caller's generator while it streams.
            conn.execute(
                t.snapshots.update()
                .where(t.snapshots.c.id == snapshot_id)
                .values(record_count=count, complete=True, files=dumps(files))
            )
        return count

    def _write_records(
        self,
        conn: Connection,
        snapshot_id: str,
        rows: Iterable[RecordRow | RecordSpan | dict[str, Any]],
    ) -> tuple[int, bool]:
        """Insert ``rows``; (how many records, whether a key of a span may repeat). No key
        repeats when every key sorts after the one before, spans and rows alike."""
        count, spans, ascending = 0, False, True
        last = ""
        chunk: list[RecordRow | dict[str, Any]] = []
        for row in rows:
            if isinstance(row, RecordSpan):
                self._append_span(conn, snapshot_id, row)
                count += len(row.keys)
                spans = True
                if row.keys:
                    ascending = ascending and row.ascending and last < row.keys[0]
                    last = row.keys[-1]
                continue
            key = row["key"] if isinstance(row, dict) else row.key
            ascending = ascending and last < key
            last = key
            if isinstance(row, dict):
                row["snapshot_id"] = snapshot_id
            chunk.append(row)
            if len(chunk) >= _CHUNK:
                self._bulk(conn, t.records, chunk)
                count += len(chunk)
                chunk = []
        if chunk:
            self._bulk(conn, t.records, chunk)
            count += len(chunk)
        return count, spans and not ascending

    def _append_span(self, conn: Connection, snapshot_id: str, span: RecordSpan) -> None:
        """One span of records, straight to the driver: the snapshot's id and the file
        name are written once in the statement (SQLite) or sent by ``COPY``
        (PostgreSQL), so only the seq, key, position and payload of a record are bound."""
        size = len(span.keys)
        seqs = range(span.seq, span.seq + size)
        positions = range(span.n, span.n + size)
        if self.hooks.postgres:
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            with cursor.copy(_COPY) as copy:
                for seq, key, n, payload in zip(
                    seqs, span.keys, positions, span.payloads, strict=True
                ):
                    copy.write_row((snapshot_id, seq, key, span.file, n, 0, payload))
            return
        row = f"({_literal(snapshot_id)}, ?, ?, {_literal(span.file)}, ?, 0, ?)"
        whole = size - size % _SPAN_ROWS
        if whole:
            conn.exec_driver_sql(
                _INSERT + ", ".join([row] * _SPAN_ROWS),
                [_interleaved(span, i, i + _SPAN_ROWS) for i in range(0, whole, _SPAN_ROWS)],
            )
        if whole < size:
            rest = zip(
                seqs[whole:],
                span.keys[whole:],
                positions[whole:],
                span.payloads[whole:],
                strict=True,
            )
            conn.exec_driver_sql(_INSERT + row, list(rest))

    @staticmethod
    def _repeats_a_key(conn: Connection, snapshot_id: str) -> bool:
        """Whether two records of the snapshot share a key (read off the key index)."""
        r = t.records
        return (
            conn.execute(
                sa.select(r.c.key)
                .where(r.c.snapshot_id == snapshot_id)
                .group_by(r.c.key)
                .having(sa.func.count() > 1)
                .limit(1)
            ).first()
            is not None
        )

    def snapshot_attachments(self, snapshot_id: str) -> dict[str, tuple[str, int]]:
        """path -> (sha256, size) of every file the snapshot's records attach."""
        sa_ = t.snapshot_attachments
        with self._read() as conn:
            rows = conn.execute(
                sa.select(sa_.c.path, sa_.c.sha256, sa_.c.size).where(
                    sa_.c.snapshot_id == snapshot_id
                )
            ).all()
        return {r.path: (r.sha256, int(r.size)) for r in rows}

    def snapshot_info(self, snapshot_id: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(
                sa.select(t.snapshots).where(t.snapshots.c.id == snapshot_id)
            ).first()

    def iter_records(
        self, snapshot_id: str, start: int = 0, stop: int | None = None
    ) -> Iterator[Row]:
        """Records with ``start <= seq < stop`` in order, read in chunks (never all at once)."""
        lo = start
        while True:
            hi = lo + _CHUNK if stop is None else min(lo + _CHUNK, stop)
            if stop is not None and lo >= stop:
                return
            with self._read() as conn:
                rows = conn.execute(
                    sa.select(t.records)
                    .where(
                        t.records.c.snapshot_id == snapshot_id,
                        t.records.c.seq >= lo,
                        t.records.c.seq < hi,
                    )
                    .order_by(t.records.c.seq)
                ).all()
            if not rows and (stop is None or hi >= stop):
                return
            yield from rows
            lo = hi

    def find_record(self, snapshot_id: str, key: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(
                sa.select(t.records)
                .where(t.records.c.snapshot_id == snapshot_id, t.records.c.key == key)
                .order_by(t.records.c.seq)
            ).first()

    def keys_need_escaping(self, snapshot_id: str) -> bool:
        """Whether a record key of the snapshot holds ``/`` or ``%`` (agac/keys.py)."""
        r = t.records
        with self._read() as conn:
            return (
                conn.execute(
                    sa.select(r.c.seq)
                    .where(
                        r.c.snapshot_id == snapshot_id,
                        sa.or_(
                            r.c.key.contains("/", autoescape=True),
                            r.c.key.contains("%", autoescape=True),
                        ),
                    )
                    .limit(1)
                ).first()
                is not None
            )
