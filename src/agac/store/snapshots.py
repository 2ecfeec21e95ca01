"""Input snapshots: a run's records, copied into the store at admission (docs/guarantees.md, The store)
(a part of :class:`agac.store.repository.Store`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agac.jsontext import dumps, loads
from agac.store import tables as t
from agac.store.core import StoreCore
from agac.store.rows import RecordRow

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

__all__ = ["SnapshotRepository"]

_CHUNK = 2000


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
        rows: Iterable[RecordRow | dict[str, Any]],
        attachments: Iterable[tuple[str, str, int, str]] = (),
    ) -> int:
        """Store an input snapshot streaming, in chunks; returns its record count. Rows are
        :class:`RecordRow` values of this snapshot, or dicts keyed by column name (given
        the snapshot's id here).

        Several processes admitting runs over the same input at once (S6) write it once:
        the first insert of the snapshot's row wins, and the others (on PostgreSQL, after
        waiting for the winner's transaction) find it complete, fill ``files`` from it and
        read none of ``rows``. A row left incomplete by an older agac is written again.
        ``attachments`` — (path, sha256, size, media type) of each file the records attach —
        are written with it."""
        count = 0
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
            chunk: list[RecordRow | dict[str, Any]] = []
            for row in rows:
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
            # ``files`` is filled by the caller's generator while it streams.
            conn.execute(
                t.snapshots.update()
                .where(t.snapshots.c.id == snapshot_id)
                .values(record_count=count, complete=True, files=dumps(files))
            )
        return count

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
