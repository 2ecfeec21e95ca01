"""The batch half of the repository API (a mixin of :class:`agac.store.repository.Store`).

A batch belongs to its shard (tenant, workflow, action, input file), not to the run that
sent it (B0): a run adopts and cancels only its own tenant's batches (T2). Items are staged by a run under ``staged:<run>:<action>:<file>`` before any
intent exists; creating the intent moves them to the batch's key in one transaction
(S1: the intent and its request fingerprints are durable before the provider is asked).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agac.jsontext import dumps
from agac.store import tables as t
from agac.store.core import StoreCore
from agac.store.rows import BatchIntent, EventRow, ItemResult, StagedItem, UsageRow
from agac.store.runs import Tenants, tenant_condition
from agac.store.values import OPEN_BATCH_STATES, BatchItem, BatchRecord, BatchState

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "BATCH_NOT_CANCELLED",
    "OPEN_BATCH_STATES",
    "SHARED_ITEM",
    "BatchRepository",
    "staged_by",
    "staged_key",
    "staged_prefix",
    "write_item_results",
]

BATCH_NOT_CANCELLED: BatchState = "not_cancelled"
"""A batch agac gave up (``--fresh``, ``agac cancel``, no longer needed) whose cancel the
provider refused or did not answer: it may still run and be billed; nothing is read
from it."""
SHARED_ITEM = "shared"
"""The reason of an item that shares the line of an identical request of its batch (S5,
:func:`sent_items`): set when the item joins a batch already holding that line (another
part of its file, or another file's batch still out, :meth:`BatchRepository.
create_intents`), kept when it is read with that line's answer; its unit settles
``reused``."""
_SHARING_STATES: tuple[BatchState, ...] = ("submitting", "unknown", "submitted", "running")
"""The states of a batch an identical request of another part or file may join: its
lines are sent, or will be, and nothing of it is read yet."""
_CHUNK = 1000


def staged_key(run_id: str, action: str, file: str) -> str:
    """The batch key of the items run ``run_id`` staged for ``action`` and input ``file``
    before any intent exists."""
    return f"staged:{run_id}:{action}:{file}"


def staged_prefix(run_id: str, action: str | None = None) -> str:
    """The start of every staged key of the run (of one of its actions, when given)."""
    return f"staged:{run_id}:" if action is None else f"staged:{run_id}:{action}:"


def staged_by(batch_key: str, run_id: str) -> bool:
    """Whether ``batch_key`` holds items run ``run_id`` staged (not yet in a batch)."""
    return batch_key.startswith(f"staged:{run_id}:")


def sent_items(items: Iterable[BatchItem]) -> Iterator[BatchItem]:
    """The items a batch sends, in the order given (custom_id order): every one but those
    that share another item's line (``SHARED_ITEM``, set when the batch's intent was
    recorded). An identical request is asked once (S5); the others share its result."""
    return (item for item in items if item.reason != SHARED_ITEM)


def write_item_results(conn: Connection, mark: str, results: Sequence[ItemResult]) -> None:
    """Record what was read for each item, inside the caller's transaction. Items
    answered (most of them) are marked per batch with one statement a few hundred
    items at a time; the others, with their reasons, one row each."""
    answered: dict[str, list[str]] = {}
    others = []
    for key, custom_id, status, reason, detail in results:
        if status == "succeeded" and reason is None and detail is None:
            answered.setdefault(key, []).append(custom_id)
        else:
            others.append((status, reason, detail, key, custom_id))
    bi = t.batch_items
    for key, ids in answered.items():
        for i in range(0, len(ids), 500):
            conn.execute(
                bi.update()
                .where(bi.c.batch_key == key, bi.c.custom_id.in_(ids[i : i + 500]))
                .values(status="succeeded", reason=None, detail=None)
            )
    if others:
        conn.exec_driver_sql(
            f"UPDATE batch_items SET status = {mark}, reason = {mark}, "
            f"detail = {mark} WHERE batch_key = {mark} AND custom_id = {mark}",
            others,
        )


class BatchRepository(StoreCore):
    # -- staging and intents ------------------------------------------------------------

    def stage_items(self, rows: Sequence[StagedItem], *, tenant: str) -> None:
        with self._write("stage batch items") as conn:
            self._bulk(conn, t.batch_items, rows, "ON CONFLICT DO NOTHING", tenant=tenant)

    def staged_items(self, key: str) -> Iterator[BatchItem]:
        """Staged items of one group in custom_id order, streamed."""
        yield from self._iter_items(key)

    def _iter_items(self, key: str) -> Iterator[BatchItem]:
        last = ""
        bi = t.batch_items
        while True:
            with self._read() as conn:
                rows = conn.execute(
                    sa.select(bi)
                    .where(bi.c.batch_key == key, bi.c.custom_id > last)
                    .order_by(bi.c.custom_id)
                    .limit(_CHUNK)
                ).all()
            if not rows:
                return
            yield from map(BatchItem.from_row, rows)
            last = rows[-1].custom_id
            if len(rows) < _CHUNK:
                return

    def staged_sizes(self, key: str) -> Iterator[tuple[str, int, str]]:
        """(custom_id, length of its request, fingerprint) of the staged items of one
        group, in custom_id order, streamed: what splitting a file into parts needs,
        without the requests themselves (the driver's rows as they come)."""
        mark = self.hooks.param
        sql = (
            "SELECT custom_id, length(request), fingerprint FROM batch_items WHERE "
            f"batch_key = {mark} AND custom_id > {mark} ORDER BY custom_id LIMIT {_CHUNK * 10}"
        )
        last = ""
        while True:
            with self._read("read staged batch items") as conn:
                rows = conn.exec_driver_sql(sql, (key, last)).all()
            if not rows:
                return
            yield from ((r[0], int(r[1]), r[2]) for r in rows)
            last = rows[-1][0]
            if len(rows) < _CHUNK * 10:
                return

    def create_intents(
        self,
        staged: str,
        parts: Sequence[tuple[BatchIntent, list[str]]],
        shared: Mapping[str, Sequence[str]] | None = None,
        held_back: Sequence[str] = (),
    ) -> None:
        """S1: write each batch (state ``submitting``) and move its staged items to it.
        A part is a run of consecutive custom_ids (in the store's order, as
        :meth:`staged_sizes` reads them), moved with one statement. ``shared``: batch key
        -> the staged items whose identical request is a line of that batch (one of these
        parts, or another file's batch of the run still out): they join it as
        ``SHARED_ITEM``, in the same transaction, and send nothing (S5). ``held_back``:
        staged items that stay staged though a part's run of custom_ids spans them (the
        items sharing a request that makes no batch yet and waits)."""
        bi = t.batch_items
        keys = [staged, *(intent.key for intent, _ in parts)]
        with self._write("record the batch intent") as conn:
            for intent, custom_ids in parts:
                conn.execute(
                    t.batches.insert().values(
                        **intent._asdict(),
                        state="submitting",
                        meta="{}",
                        updated_at=intent.created_at,
                    )
                )
                conn.execute(
                    bi.update()
                    .where(
                        bi.c.batch_key == staged,
                        bi.c.custom_id >= custom_ids[0],
                        bi.c.custom_id <= custom_ids[-1],
                    )
                    .values(batch_key=intent.key)
                )
            for key, ids in (shared or {}).items():
                for i in range(0, len(ids), 500):
                    conn.execute(
                        bi.update()
                        .where(bi.c.batch_key.in_(keys), bi.c.custom_id.in_(ids[i : i + 500]))
                        .values(batch_key=key, reason=SHARED_ITEM)
                    )
            for i in range(0, len(held_back), 500):
                conn.execute(
                    bi.update()
                    .where(bi.c.batch_key.in_(keys), bi.c.custom_id.in_(held_back[i : i + 500]))
                    .values(batch_key=staged)
                )

    def open_lines(self, run_id: str, action: str, staged: str) -> dict[str, str]:
        """Fingerprint -> the key of a batch of run ``run_id`` for ``action``, not yet
        read, that sends a line for it, for the fingerprints of the items staged under
        ``staged``: an identical request there joins that batch instead (S5). Only the
        items of those batches are read (by their key), never the rest of the table: a
        run's first file has none to read, and a store's history costs nothing here."""
        bi, b, st = t.batch_items, t.batches, t.batch_items.alias("st")
        with self._read() as conn:
            keys = list(
                conn.execute(
                    sa.select(b.c.key).where(
                        b.c.run_id == run_id,
                        b.c.action == action,
                        b.c.state.in_(_SHARING_STATES),
                    )
                ).scalars()
            )
            if not keys:
                return {}
            rows = conn.execute(
                sa.select(bi.c.fingerprint, sa.func.min(bi.c.batch_key))
                .select_from(bi.join(b, b.c.key == bi.c.batch_key))
                .where(
                    bi.c.batch_key.in_(keys),
                    b.c.state.in_(_SHARING_STATES),
                    bi.c.status == "pending",
                    sa.or_(bi.c.reason.is_(None), bi.c.reason != SHARED_ITEM),
                    bi.c.fingerprint.in_(
                        sa.select(st.c.fingerprint).where(st.c.batch_key == staged)
                    ),
                )
                .group_by(bi.c.fingerprint)
            ).all()
        return {r[0]: r[1] for r in rows}

    def drop_staged_items(self, staged: str, custom_ids: Sequence[str]) -> None:
        """Forget staged items that will not be sent (the budget has no room for them)."""
        bi = t.batch_items
        with self._write("drop staged batch items") as conn:
            for i in range(0, len(custom_ids), 500):
                conn.execute(
                    bi.delete().where(
                        bi.c.batch_key == staged, bi.c.custom_id.in_(list(custom_ids[i : i + 500]))
                    )
                )

    def iter_batch_items(self, key: str) -> Iterator[BatchItem]:
        yield from self._iter_items(key)

    def sent_requests(self, key: str) -> Iterator[tuple[str, str]]:
        """(custom_id, stored request) of each line batch ``key`` sends, in custom_id
        order, streamed as the driver returns them: the items of :func:`sent_items`
        (those sharing an identical request's line send none, S5), without an item
        object per line — what writing the batch file needs and nothing else."""
        mark = self.hooks.param
        sql = (
            "SELECT custom_id, request FROM batch_items WHERE batch_key = "
            f"{mark} AND custom_id > {mark} AND (reason IS NULL OR reason != {mark}) "
            f"ORDER BY custom_id LIMIT {_CHUNK * 10}"
        )
        last = ""
        while True:
            with self._read("read the batch's requests") as conn:
                rows = conn.exec_driver_sql(sql, (key, last, SHARED_ITEM)).all()
            if not rows:
                return
            yield from ((r[0], r[1]) for r in rows)
            last = rows[-1][0]
            if len(rows) < _CHUNK * 10:
                return

    # -- batches ------------------------------------------------------------------------

    def update_batch(self, key: str, **fields: Any) -> None:
        fields["updated_at"] = self.clock.time()
        with self._write("update the batch") as conn:
            conn.execute(t.batches.update().where(t.batches.c.key == key).values(**fields))

    def get_batch(self, key_or_id: str, *, tenants: Tenants = None) -> BatchRecord | None:
        """The batch with our key or the provider's id ``key_or_id`` (of ``tenants``)."""
        b = t.batches
        with self._read() as conn:
            row = conn.execute(
                sa.select(b).where(
                    sa.or_(b.c.key == key_or_id, b.c.provider_batch_id == key_or_id),
                    tenant_condition(tenants, b.c.tenant),
                )
            ).first()
        return BatchRecord.from_row(row) if row is not None else None

    def list_batches(
        self,
        workflow: str | None = None,
        *,
        tenants: Tenants,
        open_only: bool = False,
        action: str | None = None,
    ) -> list[BatchRecord]:
        """Batches of ``tenants`` (None: every tenant's), newest first: of ``workflow`` and
        ``action`` when given, only open ones with ``open_only``."""
        b = t.batches
        q = (
            sa.select(b)
            .where(tenant_condition(tenants, b.c.tenant))
            .order_by(b.c.created_at.desc())
        )
        if workflow:
            q = q.where(b.c.workflow == workflow)
        if action:
            q = q.where(b.c.action == action)
        if open_only:
            q = q.where(b.c.state.in_(OPEN_BATCH_STATES))
        with self._read() as conn:
            return [BatchRecord.from_row(r) for r in conn.execute(q).all()]

    def close_settled_batches(
        self, workflow: str, *, tenant: str, run_id: str, at: float
    ) -> list[BatchRecord]:
        """Mark ``collected`` the tenant's batches of ``workflow`` still taken as out whose
        every item has been read (a crash between the last result stored and the batch
        marked collected leaves one so); returns them as they were. A batch being
        cancelled, or with no item, is left alone."""
        b, bi = t.batches, t.batch_items
        pending = sa.exists().where(bi.c.batch_key == b.c.key, bi.c.status == "pending")
        any_item = sa.exists().where(bi.c.batch_key == b.c.key)
        settled = sa.and_(
            b.c.tenant == tenant,
            b.c.workflow == workflow,
            b.c.state.in_(("submitted", "running", "ended")),
            b.c.provider_batch_id.is_not(None),
            any_item,
            sa.not_(pending),
        )
        with self._write("close settled batches") as conn:
            rows = [BatchRecord.from_row(r) for r in conn.execute(sa.select(b).where(settled))]
            if rows:
                conn.execute(
                    b.update()
                    .where(b.c.key.in_([r.key for r in rows]), settled)
                    .values(state="collected", collected_by=run_id, ended_at=at, updated_at=at)
                )
        return rows

    def known_provider_ids(self, provider: str, ids: Sequence[str]) -> set[str]:
        b = t.batches
        if not ids:
            return set()
        with self._read() as conn:
            return {
                r[0]
                for r in conn.execute(
                    sa.select(b.c.provider_batch_id).where(
                        b.c.provider == provider, b.c.provider_batch_id.in_(list(ids))
                    )
                )
            }

    def unit_items(
        self,
        workflow: str,
        action: str,
        unit_keys: Sequence[str],
        *,
        tenant: str,
        items: bool = False,
    ) -> list[BatchItem]:
        """Every batch item of these units of the tenant's workflow (any batch, staged
        included), with its batch; with ``items``, also those of the fan-out items under
        them (``key/…``)."""
        bi, b = t.batch_items, t.batches
        out: list[BatchItem] = []
        step = 100 if items else 500
        with self._read("read batch items") as conn:
            for i in range(0, len(unit_keys), step):
                part = list(unit_keys[i : i + step])
                cond: sa.ColumnElement[bool] = bi.c.unit_key.in_(part)
                if items:
                    cond = sa.or_(
                        cond, *(bi.c.unit_key.startswith(k + "/", autoescape=True) for k in part)
                    )
                out.extend(
                    map(
                        BatchItem.from_row,
                        conn.execute(
                            sa.select(
                                bi,
                                b.c.state.label("batch_state"),
                                b.c.run_id.label("batch_run"),
                                b.c.collected_by,
                                b.c.provider_batch_id,
                            )
                            .select_from(bi.outerjoin(b, b.c.key == bi.c.batch_key))
                            .where(
                                bi.c.tenant == tenant,
                                bi.c.workflow == workflow,
                                bi.c.action == action,
                                cond,
                            )
                        ).all(),
                    )
                )
        return out

    def set_item_results(
        self, key: str, results: Sequence[tuple[str, str, str | None, str | None]]
    ) -> None:
        """(custom_id, status, reason, detail) for items of batch ``key``."""
        if not results:
            return
        with self._write("record batch results") as conn:
            write_item_results(conn, self.hooks.param, [ItemResult(key, *r) for r in results])

    def settle_read_items(
        self,
        *,
        run_id: str,
        batch_key: str,
        snapshot_id: str,
        status: str,
        origin: str,
        lease: tuple[str, int, float] | None = None,
    ) -> int:
        """Answer, in one statement, the units whose item in batch ``batch_key`` (sent by
        run ``run_id``) was read with an answer, as the engine's decision answers a unit
        read from its own item (``status``/``origin`` are that decision's: ``answered``,
        ``call``): the answer's output, attempts = the run's items of the unit. Units with
        an outcome already, and invalid records (their decision is a failure), are left
        to the walk. Only for a batch action that reads records directly (unit key =
        record key); returns how many were answered."""
        bi, b, a, r, o = t.batch_items, t.batches, t.answers, t.records, t.outcomes
        mine, b2 = t.batch_items.alias("mine"), t.batches.alias("b2")
        # Most units have this one item only: then it is the run's only one. Otherwise
        # count the unit's items in this run's batches.
        same_unit = (
            mine.c.tenant == bi.c.tenant,
            mine.c.workflow == bi.c.workflow,
            mine.c.action == bi.c.action,
            mine.c.unit_key == bi.c.unit_key,
        )
        others = sa.exists().where(*same_unit, mine.c.batch_key != bi.c.batch_key)
        attempts = sa.case(
            (~others, sa.literal(1)),
            else_=(
                sa.select(sa.func.count())
                .select_from(mine.join(b2, b2.c.key == mine.c.batch_key))
                .where(*same_unit, b2.c.run_id == run_id)
                .scalar_subquery()
            ),
        )
        shared = bi.c.reason == SHARED_ITEM  # read with an identical request's answer: reused
        settled = sa.exists().where(
            o.c.run_id == run_id, o.c.action == bi.c.action, o.c.unit_key == bi.c.unit_key
        )
        sel = (
            sa.select(
                sa.literal(run_id),
                bi.c.action,
                bi.c.unit_key,
                r.c.seq,
                sa.literal(status),
                sa.null(),
                sa.null(),
                sa.case((shared, sa.literal("reused")), else_=sa.literal(origin)),
                bi.c.fingerprint,
                a.c.output,
                sa.case((shared, sa.literal(0)), else_=attempts),
                sa.literal(self.clock.time()),
            )
            .select_from(
                bi.join(b, b.c.key == bi.c.batch_key)
                .join(a, sa.and_(a.c.tenant == bi.c.tenant, a.c.fingerprint == bi.c.fingerprint))
                .join(
                    r,
                    sa.and_(
                        r.c.snapshot_id == snapshot_id,
                        r.c.key == bi.c.unit_key,
                        r.c.reason.is_(None),
                    ),
                )
            )
            .where(
                bi.c.batch_key == batch_key,
                bi.c.status == "succeeded",
                b.c.run_id == run_id,
                b.c.collected_by == run_id,
                ~settled,
            )
        )
        cols = [
            "run_id",
            "action",
            "unit_key",
            "seq",
            "status",
            "reason",
            "detail",
            "origin",
            "fingerprint",
            "output",
            "attempts",
            "updated_at",
        ]
        with self._write("answer the units of a batch read") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            # PostgreSQL's driver reports an INSERT's count only when asked to keep it.
            insert = o.insert().from_select(cols, sel).execution_options(preserve_rowcount=True)
            return int(conn.execute(insert).rowcount or 0)

    def fail_open_items(self, key: str, status: str, reason: str, detail: str) -> None:
        bi = t.batch_items
        with self._write("fail batch items") as conn:
            conn.execute(
                bi.update()
                .where(bi.c.batch_key == key, bi.c.status == "pending")
                .values(status=status, reason=reason, detail=detail)
            )

    def end_batch_unread(
        self,
        key: str,
        *,
        reason: str,
        detail: str,
        tenant: str,
        usage: Sequence[UsageRow] = (),
        events: Sequence[EventRow] = (),
        outcomes: Sequence[tuple[str, str, str, str, str]] = (),
        lease: tuple[str, int, float] | None = None,
        **batch: Any,
    ) -> None:
        """A batch agac will not read (B7, or given up), in one transaction: the ``usage``
        the provider billed for its answers (origin ``unread``), its waiting items failed
        ``reason`` with ``detail``, its ``events``, the ``outcomes`` of units that ended
        runs left waiting on it — (run_id, action, unit_key, status, reason), each still
        skipped ``batch_outstanding`` — rewritten with ``detail``, and the ``batch`` row's
        new fields. A crash leaves all or nothing, so its answers are ledgered once: the
        items stay pending and the next run bills and fails them."""
        bi, o = t.batch_items, t.outcomes
        now = self.clock.time()
        with self._write("end a batch unread") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            self._bulk(conn, t.usage, usage, tenant=tenant)
            conn.execute(
                bi.update()
                .where(bi.c.batch_key == key, bi.c.status == "pending")
                .values(status="failed", reason=reason, detail=detail)
            )
            if outcomes:
                conn.execute(
                    o.update()
                    .where(
                        o.c.run_id == sa.bindparam("b_run"),
                        o.c.action == sa.bindparam("b_action"),
                        o.c.unit_key == sa.bindparam("b_key"),
                        o.c.status == "skipped",
                        o.c.reason == "batch_outstanding",
                    )
                    .values(
                        status=sa.bindparam("b_status"),
                        reason=sa.bindparam("b_reason"),
                        detail=detail,
                        updated_at=now,
                    ),
                    [
                        {
                            "b_run": run,
                            "b_action": action,
                            "b_key": unit,
                            "b_status": status,
                            "b_reason": why,
                        }
                        for run, action, unit, status, why in outcomes
                    ],
                )
            self._bulk(conn, t.events, events)
            if batch:
                batch["updated_at"] = self.clock.time()
                conn.execute(t.batches.update().where(t.batches.c.key == key).values(**batch))

    def switch_live(
        self,
        run_id: str,
        action: str,
        *,
        state: str,
        why: str,
        batches: Sequence[tuple[str, dict[str, Any]]],
        events: Sequence[EventRow],
        lease: tuple[str, int, float] | None = None,
    ) -> None:
        """B13, in one transaction: the action's ``state`` in the run (its units go live),
        each batch's new ``meta`` (the intent to cancel it) and the ``events`` — recorded
        before any batch is cancelled, so a crash leaves the switch whole or not at all."""
        now = self.clock.time()
        ra = t.run_actions
        stmt = self.hooks.insert(ra).values(
            run_id=run_id, action=action, state=state, error=why, updated_at=now
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["run_id", "action"],
            set_={"state": state, "error": why, "updated_at": now},
        )
        with self._write("record the switch to live calls") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            conn.execute(stmt)
            for key, meta in batches:
                conn.execute(
                    t.batches.update()
                    .where(t.batches.c.key == key)
                    .values(meta=dumps(meta), updated_at=now)
                )
            self._bulk(conn, t.events, events)

    def batch_counts(self, run_id: str, workflow: str, *, tenant: str) -> dict[str, dict[str, int]]:
        """Per action: the lines this run sent in batches (its batch ``calls``: identical
        requests of a batch are one line, S5), the highest attempt among its items
        (``last_attempt``: a tool loop's round is read from it) and the tenant's batches of
        the workflow still out."""
        bi, b = t.batch_items, t.batches
        out: dict[str, dict[str, int]] = {}
        sent = (b.c.run_id == run_id, b.c.provider_batch_id.is_not(None))
        with self._read() as conn:
            for row in conn.execute(
                sa.select(b.c.action, sa.func.sum(b.c.request_count).label("n"))
                .where(*sent)
                .group_by(b.c.action)
            ):
                out.setdefault(row.action, {"sent": 0, "out": 0})["sent"] = int(row.n or 0)
            for row in conn.execute(
                sa.select(bi.c.action, sa.func.max(bi.c.attempt).label("last"))
                .select_from(bi.join(b, b.c.key == bi.c.batch_key))
                .where(*sent)
                .group_by(bi.c.action)
            ):
                counted = out.setdefault(row.action, {"sent": 0, "out": 0})
                counted["last_attempt"] = int(row.last or 0)
            for row in conn.execute(
                sa.select(b.c.action, sa.func.count().label("n"))
                .where(
                    b.c.tenant == tenant, b.c.workflow == workflow, b.c.state.in_(OPEN_BATCH_STATES)
                )
                .group_by(b.c.action)
            ):
                out.setdefault(row.action, {"sent": 0, "out": 0})["out"] = row.n
        return out

    def group_counts(
        self, workflow: str, action: str, staged_prefix: str, *, tenant: str
    ) -> dict[str, dict[str, int]]:
        """Per input file: items staged by this run, and the tenant's items in batches
        still open."""
        bi, b = t.batch_items, t.batches
        out: dict[str, dict[str, int]] = {}
        with self._read() as conn:
            for row in conn.execute(
                sa.select(bi.c.file, sa.func.count().label("n"))
                .where(
                    bi.c.tenant == tenant,
                    bi.c.workflow == workflow,
                    bi.c.action == action,
                    bi.c.batch_key.startswith(staged_prefix),
                )
                .group_by(bi.c.file)
            ):
                out.setdefault(row.file, {"staged": 0, "open": 0})["staged"] = row.n
            for row in conn.execute(
                sa.select(bi.c.file, sa.func.count().label("n"))
                .select_from(bi.join(b, b.c.key == bi.c.batch_key))
                .where(
                    bi.c.tenant == tenant,
                    bi.c.workflow == workflow,
                    bi.c.action == action,
                    b.c.state.in_(OPEN_BATCH_STATES),
                    bi.c.status == "pending",
                )
                .group_by(bi.c.file)
            ):
                out.setdefault(row.file, {"staged": 0, "open": 0})["open"] = row.n
        return out
