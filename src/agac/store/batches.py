"""The batch half of the repository API (a mixin of :class:`agac.store.repository.Store`).

A batch belongs to its shard (workflow, action, input file), not to the run that sent
it (B0). Items are staged by a run under ``staged:<run>:<action>:<file>`` before any
intent exists; creating the intent moves them to the batch's key in one transaction
(S1: the intent and its request fingerprints are durable before the provider is asked).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agac.store import tables as t

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

__all__ = ["BATCH_NOT_CANCELLED", "OPEN_BATCH_STATES", "BatchRepository", "staged_key"]

OPEN_BATCH_STATES = ("submitting", "unknown", "submitted", "running", "cancelling", "ended")
"""A batch in these states still owes its items an answer (``ended`` = not yet read)."""
BATCH_NOT_CANCELLED = "not_cancelled"
"""A batch agac gave up (``--fresh``, ``agac cancel``, no longer needed) whose cancel the
provider refused or did not answer: it may still run and be billed; nothing is read
from it."""
_CHUNK = 1000


def staged_key(run_id: str, action: str, file: str) -> str:
    return f"staged:{run_id}:{action}:{file}"


class BatchRepository:
    engine: Any

    def _guard(self, what: str) -> Any: ...  # provided by Store

    def _bulk(self, conn: Any, table: sa.Table, rows: Sequence[dict[str, Any]], suffix: str = "") -> None: ...

    # -- staging and intents ------------------------------------------------------------

    def stage_items(self, rows: Sequence[dict[str, Any]]) -> None:
        with self._guard("stage batch items"), self.engine.begin() as conn:
            self._bulk(conn, t.batch_items, rows, "ON CONFLICT DO NOTHING")

    def staged_items(self, key: str) -> Iterator[Row]:
        """Staged items of one group in custom_id order, streamed."""
        yield from self._iter_items(key)

    def _iter_items(self, key: str) -> Iterator[Row]:
        last = ""
        bi = t.batch_items
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    sa.select(bi).where(bi.c.batch_key == key, bi.c.custom_id > last)
                    .order_by(bi.c.custom_id).limit(_CHUNK)
                ).all()
            if not rows:
                return
            yield from rows
            last = rows[-1].custom_id
            if len(rows) < _CHUNK:
                return

    def create_intents(self, staged: str, parts: list[tuple[dict[str, Any], list[str]]]) -> None:
        """S1: write each batch row (state ``submitting``) and move its staged items to it."""
        bi = t.batch_items
        with self._guard("record the batch intent"), self.engine.begin() as conn:
            for row, custom_ids in parts:
                conn.execute(t.batches.insert().values(**row))
                for i in range(0, len(custom_ids), 500):
                    conn.execute(
                        bi.update()
                        .where(bi.c.batch_key == staged, bi.c.custom_id.in_(custom_ids[i:i + 500]))
                        .values(batch_key=row["key"])
                    )

    def drop_staged_items(self, staged: str, custom_ids: Sequence[str]) -> None:
        """Forget staged items that will not be sent (the budget has no room for them)."""
        bi = t.batch_items
        with self._guard("drop staged batch items"), self.engine.begin() as conn:
            for i in range(0, len(custom_ids), 500):
                conn.execute(bi.delete().where(bi.c.batch_key == staged,
                                               bi.c.custom_id.in_(list(custom_ids[i:i + 500]))))

    def iter_batch_items(self, key: str) -> Iterator[Row]:
        yield from self._iter_items(key)

    # -- batches ------------------------------------------------------------------------

    def update_batch(self, key: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        with self._guard("update the batch"), self.engine.begin() as conn:
            conn.execute(t.batches.update().where(t.batches.c.key == key).values(**fields))

    def get_batch(self, key_or_id: str) -> Row | None:
        b = t.batches
        with self.engine.connect() as conn:
            return conn.execute(
                sa.select(b).where(sa.or_(b.c.key == key_or_id, b.c.provider_batch_id == key_or_id))
            ).first()

    def list_batches(self, workflow: str | None = None, *, open_only: bool = False,
                     action: str | None = None) -> list[Row]:
        b = t.batches
        q = sa.select(b).order_by(b.c.created_at.desc())
        if workflow:
            q = q.where(b.c.workflow == workflow)
        if action:
            q = q.where(b.c.action == action)
        if open_only:
            q = q.where(b.c.state.in_(OPEN_BATCH_STATES))
        with self.engine.connect() as conn:
            return list(conn.execute(q).all())

    def known_provider_ids(self, provider: str, ids: Sequence[str]) -> set[str]:
        b = t.batches
        if not ids:
            return set()
        with self.engine.connect() as conn:
            return {r[0] for r in conn.execute(
                sa.select(b.c.provider_batch_id).where(b.c.provider == provider,
                                                       b.c.provider_batch_id.in_(list(ids))))}

    def unit_items(self, workflow: str, action: str, unit_keys: Sequence[str], *,
                   items: bool = False) -> list[Row]:
        """Every batch item of these units (any batch, staged included), with its batch;
        with ``items``, also those of the fan-out items under them (``key/…``)."""
        bi, b = t.batch_items, t.batches
        out: list[Row] = []
        step = 100 if items else 500
        with self._guard("read batch items"), self.engine.connect() as conn:
            for i in range(0, len(unit_keys), step):
                part = list(unit_keys[i:i + step])
                cond: sa.ColumnElement[bool] = bi.c.unit_key.in_(part)
                if items:
                    cond = sa.or_(cond, *(bi.c.unit_key.startswith(k + "/", autoescape=True)
                                          for k in part))
                out.extend(conn.execute(
                    sa.select(bi, b.c.state.label("batch_state"), b.c.run_id.label("batch_run"),
                              b.c.collected_by)
                    .select_from(bi.outerjoin(b, b.c.key == bi.c.batch_key))
                    .where(bi.c.workflow == workflow, bi.c.action == action, cond)
                ).all())
        return out

    def set_item_results(self, key: str, results: Sequence[tuple[str, str, str | None, str | None]]) -> None:
        """(custom_id, status, reason, detail) for items of batch ``key``."""
        if not results:
            return
        mark = "?" if self.engine.dialect.name == "sqlite" else "%s"
        sql = (f"UPDATE batch_items SET status = {mark}, reason = {mark}, detail = {mark} "
               f"WHERE batch_key = {mark} AND custom_id = {mark}")
        with self._guard("record batch results"), self.engine.begin() as conn:
            conn.exec_driver_sql(sql, [(s, r, d, key, c) for c, s, r, d in results])

    def fail_open_items(self, key: str, status: str, reason: str, detail: str) -> None:
        bi = t.batch_items
        with self._guard("fail batch items"), self.engine.begin() as conn:
            conn.execute(bi.update().where(bi.c.batch_key == key, bi.c.status == "pending")
                         .values(status=status, reason=reason, detail=detail))

    def batch_counts(self, run_id: str, workflow: str) -> dict[str, dict[str, int]]:
        """Per action: items this run sent in batches (its batch ``calls``) and the
        workflow's batches still out."""
        bi, b = t.batch_items, t.batches
        out: dict[str, dict[str, int]] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(
                sa.select(bi.c.action, sa.func.count().label("n"))
                .select_from(bi.join(b, b.c.key == bi.c.batch_key))
                .where(b.c.run_id == run_id, b.c.provider_batch_id.is_not(None))
                .group_by(bi.c.action)
            ):
                out.setdefault(row.action, {"sent": 0, "out": 0})["sent"] = row.n
            for row in conn.execute(
                sa.select(b.c.action, sa.func.count().label("n"))
                .where(b.c.workflow == workflow, b.c.state.in_(OPEN_BATCH_STATES))
                .group_by(b.c.action)
            ):
                out.setdefault(row.action, {"sent": 0, "out": 0})["out"] = row.n
        return out

    def group_counts(self, workflow: str, action: str, staged_prefix: str) -> dict[str, dict[str, int]]:
        """Per input file: items staged by this run, and items in batches still open."""
        bi, b = t.batch_items, t.batches
        out: dict[str, dict[str, int]] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(
                sa.select(bi.c.file, sa.func.count().label("n"))
                .where(bi.c.workflow == workflow, bi.c.action == action,
                       bi.c.batch_key.startswith(staged_prefix))
                .group_by(bi.c.file)
            ):
                out.setdefault(row.file, {"staged": 0, "open": 0})["staged"] = row.n
            for row in conn.execute(
                sa.select(bi.c.file, sa.func.count().label("n"))
                .select_from(bi.join(b, b.c.key == bi.c.batch_key))
                .where(bi.c.workflow == workflow, bi.c.action == action,
                       b.c.state.in_(OPEN_BATCH_STATES), bi.c.status == "pending")
                .group_by(bi.c.file)
            ):
                out.setdefault(row.file, {"staged": 0, "open": 0})["open"] = row.n
        return out
