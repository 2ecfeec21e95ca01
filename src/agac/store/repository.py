"""The store's one repository API: every read and write of agac's state goes here.

The engine calls these methods from a single store thread (see
:mod:`agac.engine.checkpoint`), never with inline SQL elsewhere. Writes that make
progress durable go through :meth:`Store.checkpoint`, one transaction that first
checks the caller's fencing token (S3) and fails closed (S2) on any error.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import operator
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row

from agac.errors import LeaseHeld, LeaseLost, StoreError
from agac.jsontext import dumps, loads
from agac.store import tables as t
from agac.store.approvals import ApprovalRepository
from agac.store.batches import BatchRepository
from agac.store.claims import ClaimRepository
from agac.store.dashboard import DashboardRepository
from agac.store.database import (
    DriverFailure,
    create_store_engine,
    describe_driver_error,
    upgrade,
)
from agac.store.effects import EffectRepository
from agac.store.people import PeopleRepository

__all__ = ["FINAL_STATES", "Store", "dumps", "loads"]

FINAL_STATES = ("succeeded", "partial", "failed", "timed_out", "exhausted", "cancelled")
_CHUNK = 2000
_ROWS_PER_STATEMENT = (256, 64, 16, 4, 1)
"""Rows per multi-row INSERT on SQLite (a few fixed sizes, so a few cached statements)."""
_NOT_CARRIED = ("batch_outstanding", "cancelled", "deadline", "budget_exhausted", "run_ended")


class Store(BatchRepository, EffectRepository, ApprovalRepository, ClaimRepository,
            PeopleRepository, DashboardRepository):
    """A connection to one agac store (SQLite file, PostgreSQL, or ``memory``)."""

    WAL_AUTOCHECKPOINT = 10000
    """SQLite's automatic checkpoint, in pages (a storage point's working copy: 0)."""

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.url = url
        self.engine: Engine = create_store_engine(url, wal_autocheckpoint=self.WAL_AUTOCHECKPOINT)
        self.dialect = self.engine.dialect.name
        self.memory = url == "memory"
        self._bulk_cache: dict[tuple[str, str, int], tuple[str, tuple[str, ...]]] = {}
        self.notes: list[str] = []
        """What the user should hear about the store itself (a storage point's torn log, O3)."""
        if migrate:
            upgrade(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def durability_ticket(self) -> concurrent.futures.Future[None] | None:
        """The durability acknowledgement: None when a commit is durable as it returns (SQL
        stores); else a future answered once everything committed so far is stored durably
        (a storage point ships its log, O1), which an effect waits for before it starts."""
        return None

    def owner_confirmed(self) -> bool:
        """True while this process's hold needs no confirming before an effect: always on
        SQL stores (every write checks the fencing token); a storage point says whether
        its lease was confirmed lately (O2)."""
        return True

    def confirm_owner(self) -> None:
        """Confirm this process still owns what it writes (a storage point rewrites its
        ``head``); raises LeaseLost/StoreError otherwise. Nothing to do on SQL stores."""

    @property
    def point(self) -> bool:
        """True for a storage point (object storage or a directory, DESIGN §14)."""
        return False

    # -- plumbing -------------------------------------------------------------------

    def _insert(self, table: sa.Table) -> Any:
        """The dialect's INSERT, which knows ON CONFLICT."""
        # Imported here: the PostgreSQL dialect package alone costs ~45 ms of start-up,
        # which a run on SQLite never needs.
        if self.dialect == "postgresql":
            from sqlalchemy.dialects import postgresql

            return postgresql.insert(table)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)

    def _read(self) -> Connection:
        return self.engine.connect()

    def _guard(self, what: str) -> _Guard:
        return _Guard(what, self.url)

    # -- leases (S3) ----------------------------------------------------------------

    def acquire_lease(
        self, name: str, *, host: str, pid: int, ttl: float, may_take: Any = None
    ) -> int:
        """Take lease ``name`` and return its new fencing token.

        Free or expired leases are taken; a lease held by another owner is taken only
        when ``may_take(row)`` says so (e.g. a dead process on this host). Otherwise
        :class:`LeaseHeld` names the owner and expiry.
        """
        now = time.time()
        with self._guard("take the lease"), self.engine.begin() as conn:
            row = conn.execute(
                sa.select(t.leases).where(t.leases.c.name == name).with_for_update()
            ).first()
            if row is None:
                # Two processes can both find no row; the second insert must lose cleanly
                # (LeaseHeld), not fail the store guard with a unique violation.
                res = conn.execute(
                    self._insert(t.leases)
                    .values(name=name, host=host, pid=pid, token=1, expires_at=now + ttl)
                    .on_conflict_do_nothing(index_elements=["name"])
                    .returning(t.leases.c.name)
                )
                if res.first() is None:
                    raise LeaseHeld("the lease was taken by another process at the same moment")
                return 1
            mine = row.host == host and row.pid == pid
            if not mine and row.expires_at > now and not (may_take and may_take(row)):
                raise LeaseHeld(
                    f"owned by pid {row.pid} on {row.host} until "
                    f"{time.strftime('%H:%M:%S', time.localtime(row.expires_at))}"
                )
            token = row.token + 1
            res = conn.execute(
                t.leases.update()
                .where(t.leases.c.name == name, t.leases.c.token == row.token)
                .values(host=host, pid=pid, token=token, expires_at=now + ttl)
            )
            if res.rowcount != 1:
                raise LeaseHeld("the lease was taken by another process at the same moment")
            return token

    def renew_lease(self, name: str, token: int, ttl: float) -> None:
        with self._guard("renew the lease"), self.engine.begin() as conn:
            self._fence(conn, name, token, ttl)

    def release_lease(self, name: str, token: int) -> None:
        with self._guard("release the lease"), self.engine.begin() as conn:
            conn.execute(
                t.leases.update()
                .where(t.leases.c.name == name, t.leases.c.token == token)
                .values(expires_at=0.0)
            )

    def get_lease(self, name: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(sa.select(t.leases).where(t.leases.c.name == name)).first()

    @staticmethod
    def _fence(conn: Connection, name: str, token: int, ttl: float) -> None:
        # Straight to the driver: every checkpoint begins with it.
        mark = "?" if conn.dialect.name == "sqlite" else "%s"
        res = conn.exec_driver_sql(
            f"UPDATE leases SET expires_at = {mark} WHERE name = {mark} AND token = {mark}",
            (time.time() + ttl, name, token),
        )
        if res.rowcount != 1:
            raise LeaseLost(f"lease {name} was taken over by another process; stopping")

    # -- runs -----------------------------------------------------------------------

    def create_run(self, **fields: Any) -> None:
        now = time.time()
        fields.setdefault("created_at", now)
        fields.setdefault("updated_at", now)
        with self._guard("admit the run"), self.engine.begin() as conn:
            conn.execute(t.runs.insert().values(**fields))

    def update_run(self, run_id: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        with self._guard("update the run"), self.engine.begin() as conn:
            conn.execute(t.runs.update().where(t.runs.c.id == run_id).values(**fields))

    def mark_run_needs_pass(self, workflow: str) -> None:
        """A change made outside a run (``agac batch resolve``) may let units move: the open
        run, if it was waiting on batches, walks its records again when it next runs."""
        with self._guard("update the run"), self.engine.begin() as conn:
            conn.execute(t.runs.update().where(t.runs.c.workflow == workflow,
                                               t.runs.c.state == "waiting")
                         .values(state="running", updated_at=time.time()))
            self._wake_workflow_shards(conn, workflow)  # and workers look at its shards now

    def end_run(self, run_id: str, state: str, error: str | None = None) -> bool:
        """Set a final state once; a run already final is never changed (returns False)."""
        now = time.time()
        with self._guard("end the run"), self.engine.begin() as conn:
            res = conn.execute(
                t.runs.update()
                .where(t.runs.c.id == run_id, t.runs.c.state.not_in(FINAL_STATES))
                .values(state=state, ended_at=now, updated_at=now, error=error)
            )
            return res.rowcount == 1

    def get_run(self, run_id: str) -> Row | None:
        with self._read() as conn:
            row = conn.execute(sa.select(t.runs).where(t.runs.c.id == run_id)).first()
            if row is None and len(run_id) >= 4:
                rows = conn.execute(
                    sa.select(t.runs).where(t.runs.c.id.startswith(run_id)).limit(2)
                ).all()
                row = rows[0] if len(rows) == 1 else None
            return row

    def open_run(self, workflow: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(
                sa.select(t.runs)
                .where(t.runs.c.workflow == workflow, t.runs.c.state.not_in(FINAL_STATES))
                .order_by(t.runs.c.created_at.desc())
            ).first()

    def latest_run(self, workflow: str, *, final: bool = False) -> Row | None:
        q = sa.select(t.runs).where(t.runs.c.workflow == workflow)
        if final:
            q = q.where(t.runs.c.state.in_(FINAL_STATES))
        with self._read() as conn:
            return conn.execute(q.order_by(t.runs.c.created_at.desc()).limit(1)).first()

    def list_runs(self, workflow: str | None = None, limit: int = 50) -> list[Row]:
        q = sa.select(t.runs).order_by(t.runs.c.created_at.desc()).limit(limit)
        if workflow:
            q = q.where(t.runs.c.workflow == workflow)
        with self._read() as conn:
            return list(conn.execute(q).all())

    def prune_runs(self, run_ids: Sequence[str]) -> dict[str, int]:
        """``agac gc``: delete the outcomes, events and action states of these runs and mark
        them pruned; the runs' rows, their usage (the cost ledger), answers, tool results,
        batches and effects stay. Input snapshots no run still needs go too."""
        counts = {"runs": 0, "outcomes": 0, "events": 0, "records": 0}
        if not run_ids:
            return counts
        with self._guard("prune old runs"), self.engine.begin() as conn:
            for i in range(0, len(run_ids), 500):
                part = list(run_ids[i:i + 500])
                counts["outcomes"] += conn.execute(
                    t.outcomes.delete().where(t.outcomes.c.run_id.in_(part))).rowcount
                counts["events"] += conn.execute(
                    t.events.delete().where(t.events.c.run_id.in_(part))).rowcount
                conn.execute(t.fanouts.delete().where(t.fanouts.c.run_id.in_(part)))
                conn.execute(t.run_actions.delete().where(t.run_actions.c.run_id.in_(part)))
                for row in conn.execute(sa.select(t.runs.c.id, t.runs.c.options)
                                        .where(t.runs.c.id.in_(part))).all():
                    options = {**(loads(row.options) or {}), "pruned": time.time()}
                    conn.execute(t.runs.update().where(t.runs.c.id == row.id)
                                 .values(options=dumps(options)))
                    counts["runs"] += 1
            kept = {r.snapshot_id for r in conn.execute(
                sa.select(t.runs.c.snapshot_id, t.runs.c.options)).all()
                if "pruned" not in (loads(r.options) or {})}
            orphans = [r[0] for r in conn.execute(sa.select(t.snapshots.c.id)).all()
                       if r[0] not in kept]
            for snap in orphans:
                counts["records"] += conn.execute(
                    t.records.delete().where(t.records.c.snapshot_id == snap)).rowcount
                conn.execute(t.snapshots.delete().where(t.snapshots.c.id == snap))
        return counts

    def set_action_state(self, run_id: str, action: str, state: str, error: str | None) -> None:
        ins = self._insert(t.run_actions).values(
            run_id=run_id, action=action, state=state, error=error, updated_at=time.time()
        )
        stmt = ins.on_conflict_do_update(
            index_elements=["run_id", "action"],
            set_={"state": state, "error": error, "updated_at": time.time()},
        )
        with self._guard("record the action state"), self.engine.begin() as conn:
            conn.execute(stmt)

    def action_states(self, run_id: str) -> dict[str, tuple[str, str | None]]:
        with self._read() as conn:
            rows = conn.execute(
                sa.select(t.run_actions.c.action, t.run_actions.c.state, t.run_actions.c.error)
                .where(t.run_actions.c.run_id == run_id)
            ).all()
        return {r.action: (r.state, r.error) for r in rows}

    # -- input snapshots --------------------------------------------------------------

    def snapshot_complete(self, snapshot_id: str) -> bool:
        with self._read() as conn:
            row = conn.execute(
                sa.select(t.snapshots.c.complete).where(t.snapshots.c.id == snapshot_id)
            ).first()
        return bool(row and row.complete)

    def write_snapshot(
        self, snapshot_id: str, files: list[dict[str, Any]], rows: Iterable[dict[str, Any]]
    ) -> int:
        """Store an input snapshot streaming, in chunks; returns its record count."""
        count = 0
        with self._guard("snapshot the input"), self.engine.begin() as conn:
            conn.execute(t.records.delete().where(t.records.c.snapshot_id == snapshot_id))
            conn.execute(t.snapshots.delete().where(t.snapshots.c.id == snapshot_id))
            conn.execute(
                t.snapshots.insert().values(
                    id=snapshot_id, files=dumps(files), record_count=0,
                    complete=False, created_at=time.time(),
                )
            )
            chunk: list[dict[str, Any]] = []
            for row in rows:
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

    def snapshot_info(self, snapshot_id: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(sa.select(t.snapshots).where(t.snapshots.c.id == snapshot_id)).first()

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
                    .where(t.records.c.snapshot_id == snapshot_id, t.records.c.seq >= lo,
                           t.records.c.seq < hi)
                    .order_by(t.records.c.seq)
                ).all()
            if not rows and (stop is None or hi >= stop):
                return
            yield from rows
            lo = hi

    def find_record(self, snapshot_id: str, key: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(
                sa.select(t.records).where(
                    t.records.c.snapshot_id == snapshot_id, t.records.c.key == key
                ).order_by(t.records.c.seq)
            ).first()

    # -- outcomes, answers, tool results ------------------------------------------------

    def outcomes_between(self, run_id: str, lo: int, hi: int) -> list[Row]:
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.outcomes).where(
                        t.outcomes.c.run_id == run_id, t.outcomes.c.seq >= lo, t.outcomes.c.seq < hi
                    )
                ).all()
            )

    def unit_outcomes(self, run_id: str, unit_key: str) -> list[Row]:
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.outcomes).where(
                        t.outcomes.c.run_id == run_id, t.outcomes.c.unit_key == unit_key
                    )
                ).all()
            )

    def iter_action_outcomes(self, run_id: str, action: str) -> Iterator[Row]:
        """Outcomes of one action in record order, streamed."""
        o = t.outcomes
        last, last_key = -1, ""
        while True:
            # Items of a fan-out share their record's seq: page on (seq, unit_key).
            after = sa.or_(o.c.seq > last, sa.and_(o.c.seq == last, o.c.unit_key > last_key))
            with self._read() as conn:
                rows = conn.execute(
                    sa.select(o)
                    .where(o.c.run_id == run_id, o.c.action == action, after)
                    .order_by(o.c.seq, o.c.unit_key)
                    .limit(_CHUNK)
                ).all()
            if not rows:
                return
            yield from rows
            last, last_key = rows[-1].seq, rows[-1].unit_key
            if len(rows) < _CHUNK:
                return

    def failed_units(self, run_id: str, *, with_outstanding: bool = False) -> list[Row]:
        """Failed units of a run (and, optionally, units skipped ``batch_outstanding``)."""
        o = t.outcomes
        cond = o.c.status == "failed"
        if with_outstanding:
            cond = sa.or_(cond, sa.and_(o.c.status == "skipped", o.c.reason == "batch_outstanding"))
        with self._read() as conn:
            return list(conn.execute(
                sa.select(o.c.action, o.c.unit_key, o.c.reason, o.c.seq)
                .where(o.c.run_id == run_id, cond)
            ).all())

    def copy_outcomes(self, src: str, dst: str, exclude: set[tuple[str, str]]) -> int:
        """Carry outcomes of run ``src`` into ``dst`` except ``exclude`` (action, unit_key)."""
        n = 0
        with self._guard("carry outcomes over"), self.engine.begin() as conn:
            rows = conn.execute(sa.select(t.outcomes).where(t.outcomes.c.run_id == src))
            batch: list[dict[str, Any]] = []
            for row in rows:
                if (row.action, row.unit_key) in exclude:
                    continue
                d = dict(row._mapping)
                d["run_id"] = dst
                d["origin"] = "carried"
                batch.append(d)
                if len(batch) >= _CHUNK:
                    conn.execute(t.outcomes.insert(), batch)
                    n += len(batch)
                    batch = []
            if batch:
                conn.execute(t.outcomes.insert(), batch)
                n += len(batch)
            self._copy_fanouts(conn, src, dst)
        return n

    @staticmethod
    def _copy_fanouts(conn: Connection, src: str, dst: str) -> None:
        """The fan-outs of ``src`` are ``dst``'s too: the item units carried over with them
        are counted against them (a unit that fans out again overwrites its row)."""
        f = t.fanouts
        sel = sa.select(sa.literal(dst), f.c.action, f.c.parent_key, f.c.seq, f.c["items"],
                        f.c.created_at).where(f.c.run_id == src)
        conn.execute(f.insert().from_select(
            ["run_id", "action", "parent_key", "seq", "items", "created_at"], sel))

    def carry_run_outcomes(self, src: str, dst: str, skip_actions: Sequence[str]) -> int:
        """Copy every outcome of run ``src`` into ``dst`` in one statement (R1 fast path):
        answered units become ``reused``, failures and skips ``carried``."""
        o = t.outcomes
        now = time.time()
        origin = sa.case((o.c.status == "answered", sa.literal("reused")), else_=sa.literal("carried"))
        sel = sa.select(
            sa.literal(dst), o.c.action, o.c.unit_key, o.c.seq, o.c.status, o.c.reason, o.c.detail,
            origin, o.c.fingerprint, o.c.output, sa.literal(0), sa.literal(now),
        ).where(o.c.run_id == src)
        if skip_actions:
            sel = sel.where(o.c.action.not_in(list(skip_actions)))
        # Skips that only say a run stopped early are not outcomes to carry: those units
        # are asked (or adopted from the batches still out) by the new run.
        sel = sel.where(sa.not_(sa.and_(o.c.status == "skipped", o.c.reason.in_(_NOT_CARRIED))))
        cols = ["run_id", "action", "unit_key", "seq", "status", "reason", "detail", "origin",
                "fingerprint", "output", "attempts", "updated_at"]
        with self._guard("carry outcomes over"), self.engine.begin() as conn:
            n = conn.execute(o.insert().from_select(cols, sel)).rowcount
            self._copy_fanouts(conn, src, dst)
            return n

    def count_action_outcomes_between(self, run_id: str, action: str, lo: int, hi: int) -> int:
        o = t.outcomes
        with self._read() as conn:
            return int(conn.execute(
                sa.select(sa.func.count()).select_from(o).where(
                    o.c.run_id == run_id, o.c.action == action, o.c.seq >= lo, o.c.seq < hi)
            ).scalar() or 0)

    def count_outcomes_between(self, run_id: str, lo: int, hi: int) -> int:
        with self._read() as conn:
            return int(conn.execute(
                sa.select(sa.func.count()).select_from(t.outcomes).where(
                    t.outcomes.c.run_id == run_id, t.outcomes.c.seq >= lo, t.outcomes.c.seq < hi)
            ).scalar() or 0)

    def status_counts_between(self, run_id: str, lo: int, hi: int) -> list[Row]:
        """(action, status, n) groups of the outcomes of records ``lo <= seq < hi``."""
        o = t.outcomes
        with self._read() as conn:
            return list(conn.execute(
                sa.select(o.c.action, o.c.status, sa.func.count().label("n"))
                .where(o.c.run_id == run_id, o.c.seq >= lo, o.c.seq < hi)
                .group_by(o.c.action, o.c.status)).all())

    def get_answers(self, fingerprints: Sequence[str]) -> dict[str, str]:
        """fingerprint -> stored output JSON text, for those that exist."""
        found: dict[str, str] = {}
        if not fingerprints:
            return found
        mark = "?" if self.dialect == "sqlite" else "%s"
        with self._guard("read answers"), self._read() as conn:
            for i in range(0, len(fingerprints), 512):
                part = list(fingerprints[i : i + 512])
                # Pad to a power of two with repeats: a few statement texts, each
                # prepared once by the driver, instead of one per list length.
                size = 1 << (len(part) - 1).bit_length()
                part += part[-1:] * (size - len(part))
                rows = conn.exec_driver_sql(
                    f"SELECT fingerprint, output FROM answers WHERE fingerprint IN "
                    f"({', '.join([mark] * size)})", tuple(part)
                ).all()
                found.update({fp: out for fp, out in rows})
        return found

    def get_answer(self, fingerprint: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(
                sa.select(t.answers).where(t.answers.c.fingerprint == fingerprint)
            ).first()

    def get_tool_results(self, hashes: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        with self._guard("read tool results"), self._read() as conn:
            for i in range(0, len(hashes), 500):
                rows = conn.execute(
                    sa.select(t.tool_results.c.input_hash, t.tool_results.c.output).where(
                        t.tool_results.c.input_hash.in_(list(hashes[i : i + 500]))
                    )
                ).all()
                found.update({r.input_hash: r.output for r in rows})
        return found

    # -- fan-out items (DESIGN §11) ---------------------------------------------------

    def fanout_totals(self, run_id: str, lo: int | None = None, hi: int | None = None
                      ) -> dict[str, tuple[int, int]]:
        """fan-out action -> (parents fanned out, items they made), optionally for the
        records with ``lo <= seq < hi``."""
        f = t.fanouts
        q = (sa.select(f.c.action, sa.func.count().label("parents"),
                       sa.func.sum(f.c["items"]).label("n_items"))
             .where(f.c.run_id == run_id).group_by(f.c.action))
        if lo is not None and hi is not None:
            q = q.where(f.c.seq >= lo, f.c.seq < hi)
        with self._read() as conn:
            return {r.action: (int(r.parents), int(r.n_items or 0)) for r in conn.execute(q).all()}

    def fanouts_between(self, run_id: str, lo: int, hi: int) -> dict[tuple[str, str], int]:
        """(fan-out action, parent key) -> item count, for records ``lo <= seq < hi``."""
        f = t.fanouts
        with self._read() as conn:
            rows = conn.execute(sa.select(f.c.action, f.c.parent_key, f.c["items"].label("n")).where(
                f.c.run_id == run_id, f.c.seq >= lo, f.c.seq < hi)).all()
        return {(r.action, r.parent_key): int(r.n) for r in rows}

    def _rows_under(self, table: sa.Table, run_id: str, key: str, order: Any) -> list[Row]:
        """Rows of ``table`` for the unit ``key`` and every item under it (``key/…``)."""
        with self._read() as conn:
            return list(conn.execute(
                sa.select(table).where(table.c.run_id == run_id, sa.or_(
                    table.c.unit_key == key,
                    table.c.unit_key.startswith(key + "/", autoescape=True)))
                .order_by(order)
            ).all())

    def unit_outcomes_under(self, run_id: str, key: str) -> list[Row]:
        """Outcomes of the unit ``key`` and of every item under it (``key/…``)."""
        return self._rows_under(t.outcomes, run_id, key, t.outcomes.c.unit_key)

    def usage_under(self, run_id: str, key: str) -> list[Row]:
        return self._rows_under(t.usage, run_id, key, t.usage.c.id)

    def events_under(self, run_id: str, key: str) -> list[Row]:
        return self._rows_under(t.events, run_id, key, t.events.c.id)

    def find_outcomes(self, run_id: str, *, status: str | None = None, action: str | None = None,
                      limit: int = 10_000) -> list[Row]:
        """Outcomes of a run filtered by status and action, in record order."""
        o = t.outcomes
        q = sa.select(o.c.action, o.c.unit_key, o.c.seq, o.c.status, o.c.reason, o.c.detail,
                      o.c.origin, o.c.attempts).where(o.c.run_id == run_id)
        if status is not None:
            q = q.where(o.c.status == status)
        if action is not None:
            q = q.where(o.c.action == action)
        with self._read() as conn:
            return list(conn.execute(q.order_by(o.c.seq, o.c.unit_key, o.c.action).limit(limit)).all())

    # -- the checkpoint ---------------------------------------------------------------

    def checkpoint(
        self,
        *,
        lease: tuple[str, int, float] | None,
        outcomes: Sequence[dict[str, Any]] = (),
        answers: Sequence[dict[str, Any]] = (),
        tool_results: Sequence[dict[str, Any]] = (),
        usage: Sequence[dict[str, Any]] = (),
        events: Sequence[dict[str, Any]] = (),
        batch_items: Sequence[dict[str, Any]] = (),
        fanouts: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Write one group of progress atomically, after checking the fencing token."""
        with self._guard("write a checkpoint"), self.engine.begin() as conn:
            if lease is not None:
                self._fence(conn, *lease)
            self._bulk(conn, t.answers, answers, "ON CONFLICT DO NOTHING")
            self._bulk(conn, t.tool_results, tool_results, "ON CONFLICT DO NOTHING")
            self._bulk(conn, t.usage, usage)
            self._bulk(conn, t.outcomes, outcomes)
            self._bulk(conn, t.events, events)
            self._bulk(conn, t.batch_items, batch_items, "ON CONFLICT DO NOTHING")
            self._bulk(conn, t.fanouts, fanouts,
                       "ON CONFLICT (run_id, action, parent_key) DO UPDATE SET items = excluded.items")

    def _bulk(
        self, conn: Connection, table: sa.Table, rows: Sequence[dict[str, Any]], suffix: str = ""
    ) -> None:
        """INSERT straight to the driver: the hot path of every checkpoint.

        The statement text is built once per table from the table's own columns; rows
        are dicts keyed by column name (an autoincrement ``id`` is left to the database).
        On SQLite, rows go as multi-row ``VALUES`` lists of a few fixed sizes instead of
        one ``executemany`` step per row: the driver gives up the GIL around every step,
        and a store thread that must win it back once per row waits on the event loop
        each time; a handful of statements per group keeps it to a handful of waits.
        """
        if not rows:
            return
        cols = self._bulk_sql(table, suffix, 1)[1]
        try:
            get = operator.itemgetter(*cols)
            values = [get(r) for r in rows]
        except KeyError:
            values = [tuple(r.get(c) for c in cols) for r in rows]
        if len(cols) == 1:
            values = [(v,) for v in values]
        if self.dialect != "sqlite":
            conn.exec_driver_sql(self._bulk_sql(table, suffix, 1)[0], values)
            return
        at = 0
        for size in _ROWS_PER_STATEMENT:
            n = (len(values) - at) // size
            if not n:
                continue
            sql = self._bulk_sql(table, suffix, size)[0]
            if size == 1:
                conn.exec_driver_sql(sql, values[at:])
                return
            chunks = [tuple(itertools.chain.from_iterable(values[i : i + size]))
                      for i in range(at, at + n * size, size)]
            conn.exec_driver_sql(sql, chunks)
            at += n * size

    def _bulk_sql(self, table: sa.Table, suffix: str, size: int) -> tuple[str, tuple[str, ...]]:
        key = (table.name, suffix, size)
        cached = self._bulk_cache.get(key)
        if cached is None:
            cols = tuple(c.name for c in table.columns if not (c.primary_key and c.autoincrement is True))
            mark = "?" if self.dialect == "sqlite" else "%s"
            row = f"({', '.join([mark] * len(cols))})"
            sql = f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES {', '.join([row] * size)} {suffix}"
            cached = self._bulk_cache[key] = (sql, cols)
        return cached

    # -- events -------------------------------------------------------------------------

    def iter_events(self, run_id: str, after: int = 0, limit: int = 1000) -> list[Row]:
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.events)
                    .where(t.events.c.run_id == run_id, t.events.c.id > after)
                    .order_by(t.events.c.id)
                    .limit(limit)
                ).all()
            )

    def unit_events(self, run_id: str, unit_key: str) -> list[Row]:
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.events)
                    .where(t.events.c.run_id == run_id, t.events.c.unit_key == unit_key)
                    .order_by(t.events.c.id)
                ).all()
            )

    # -- summaries ------------------------------------------------------------------------

    def outcome_counts(self, run_id: str) -> list[Row]:
        """(action, status, reason, origin, n) groups of a run's outcomes."""
        o = t.outcomes
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(o.c.action, o.c.status, o.c.reason, o.c.origin,
                              sa.func.count().label("n"))
                    .where(o.c.run_id == run_id)
                    .group_by(o.c.action, o.c.status, o.c.reason, o.c.origin)
                ).all()
            )

    def usage_totals(self, run_ids: Sequence[str]) -> list[Row]:
        """(action, kind, provider, model, tier) groups: calls, tokens, cost."""
        u = t.usage
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(
                        u.c.action, u.c.kind, u.c.provider, u.c.model, u.c.tier,
                        sa.func.count().label("calls"),
                        sa.func.sum(u.c.input_tokens).label("input_tokens"),
                        sa.func.sum(u.c.cached_tokens).label("cached_tokens"),
                        sa.func.sum(u.c.cache_write_tokens).label("cache_write_tokens"),
                        sa.func.sum(u.c.output_tokens).label("output_tokens"),
                        sa.func.sum(u.c.cost_usd).label("cost_usd"),
                    )
                    .where(u.c.run_id.in_(list(run_ids)))
                    .group_by(u.c.action, u.c.kind, u.c.provider, u.c.model, u.c.tier)
                ).all()
            )

    def unit_usage(self, run_id: str, unit_key: str) -> list[Row]:
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.usage)
                    .where(t.usage.c.run_id == run_id, t.usage.c.unit_key == unit_key)
                    .order_by(t.usage.c.id)
                ).all()
            )

    def runs_of_unit(self, unit_key: str, workflow: str | None) -> list[Row]:
        q = (
            sa.select(t.runs)
            .join(t.outcomes, t.outcomes.c.run_id == t.runs.c.id)
            .where(t.outcomes.c.unit_key == unit_key)
            .distinct()
            .order_by(t.runs.c.created_at.desc())
        )
        if workflow:
            q = q.where(t.runs.c.workflow == workflow)
        with self._read() as conn:
            return list(conn.execute(q).all())


class _Guard:
    """Say what failed (S2: fail closed): a driver failure becomes StoreError "cannot
    <what>: <the driver's words>", without the SQL or its values (see
    :func:`agac.store.database.describe_driver_error`)."""

    def __init__(self, what: str, url: str) -> None:
        self.what = what
        self.url = url

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, DriverFailure):
            raise StoreError(f"cannot {self.what}: {exc.message}", hint=exc.hint) from exc
        if isinstance(exc, sa.exc.SQLAlchemyError):
            message, hint = describe_driver_error(exc, self.url)
            raise StoreError(f"cannot {self.what}: {message}", hint=hint) from exc
