"""The scale-out half of the repository API (a mixin of :class:`agac.store.repository.Store`):
shard claims, worker heartbeats, global rate windows and the work channel.

Coordination uses PostgreSQL only (docs/guarantees.md, The store, S3 in worker mode):

- a **shard** row (run, shard) is work; a worker claims one with ``SELECT … FOR UPDATE
  SKIP LOCKED`` (claims never wait on each other) and, in the same transaction, takes the
  shard's lease ``shard:<run>:<shard>`` in ``leases`` with a new fencing token. Every write
  of the shard's progress is fenced on that token (``Store.checkpoint``), so an owner that
  lost its lease has its next write refused.
- the **run lease** ``run:<run>`` of ``agac run`` (and of whoever finalizes or cancels a
  run) excludes shard claims of that run: a claim reads the run row ``FOR SHARE`` and
  skips runs whose run lease is live; :meth:`ClaimRepository.fence_shards` reads it ``FOR
  UPDATE`` after the run lease was taken, so the two can never both hold the run.
- **rate windows** are a sliding minute per key, serialized by the key's row lock and
  timed by the database's clock, so every worker sees one window.
- ``NOTIFY agac_work`` wakes idle workers when a run is submitted or a shard becomes
  ready; they poll as a fallback.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agac.store import tables as t
from agac.store.core import StoreCore
from agac.store.database import WORK_CHANNEL
from agac.store.runs import Tenants, tenant_condition
from agac.store.values import FINAL_STATES, RunRecord

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

__all__ = ["IDLE", "Claim", "ClaimRepository", "WorkListener", "shard_lease"]

IDLE = 300.0
"""Seconds an idle shard waits before it is looked at again without being woken."""


_PICK_PG = sa.text("""
SELECT s.*, extract(epoch FROM statement_timestamp()) AS db_started
FROM shards s JOIN runs r ON r.id = s.run_id
WHERE s.state = 'todo' AND s.ready_at <= :now
  AND r.state <> 'cancelling' AND NOT (r.state = ANY(:final))
  AND NOT EXISTS (SELECT 1 FROM leases l
                  WHERE l.name = 'shard:' || s.run_id || ':' || s.shard AND l.expires_at > :now)
  AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.name = 'run:' || s.run_id AND l.expires_at > :now)
ORDER BY r.created_at, s.ready_at, s.kind, s.lo
LIMIT 1
FOR UPDATE OF s SKIP LOCKED
FOR SHARE OF r SKIP LOCKED
""")
"""Pick and lock the next ready shard (PostgreSQL)."""

_TAKE = sa.text("""
WITH lease AS (
  INSERT INTO leases (name, host, pid, token, expires_at)
  VALUES (:name, :host, :pid, 1, :expires)
  ON CONFLICT (name) DO UPDATE
    SET host = excluded.host, pid = excluded.pid, token = leases.token + 1,
        expires_at = excluded.expires_at
    WHERE leases.expires_at <= :now
  RETURNING token
)
UPDATE shards SET owner = :worker, claims = claims + 1, updated_at = :now, ready_at = 0
WHERE run_id = :run_id AND shard = :shard AND EXISTS (SELECT 1 FROM lease)
RETURNING (SELECT token FROM lease) AS token, extract(epoch FROM clock_timestamp()) AS db_ended
""")
"""Take the shard's lease with a new fencing token (only if free or expired) and mark the
shard claimed, in one statement."""


def shard_lease(run_id: str, shard: str) -> str:
    return f"shard:{run_id}:{shard}"


class Claim:
    """A shard this worker holds: its row and its lease's fencing token."""

    def __init__(self, row: Row, token: int, ttl: float, seconds: float) -> None:
        self.run_id: str = row.run_id
        self.shard: str = row.shard
        self.kind: str = row.kind
        self.action: str | None = row.action
        self.file: str = row.file
        self.lo: int = row.lo
        self.hi: int = row.hi
        self.token = token
        self.ttl = ttl
        self.seconds = seconds
        """Wall time of the claim transaction, as the worker saw it."""
        self.db_seconds = 0.0
        """Database time of the claim: from the start of its first statement to the end of
        its last, by the server's clock."""

    @property
    def lease_name(self) -> str:
        return shard_lease(self.run_id, self.shard)


class ClaimRepository(StoreCore):
    # -- shards -----------------------------------------------------------------------

    def ensure_shards(self, run_id: str, rows: Sequence[dict[str, Any]]) -> int:
        """Create a run's shard rows (idempotent); returns how many the run has."""
        now = self.clock.time()
        full = [
            {
                "run_id": run_id,
                "state": "todo",
                "ready_at": 0.0,
                "owner": None,
                "claims": 0,
                "updated_at": now,
                "action": None,
                **r,
            }
            for r in rows
        ]
        if not full:
            return 0
        with self._write("create the run's shards") as conn:
            conn.execute(self.hooks.insert(t.shards).on_conflict_do_nothing(), full)
            return int(
                conn.execute(
                    sa.select(sa.func.count())
                    .select_from(t.shards)
                    .where(t.shards.c.run_id == run_id)
                ).scalar()
                or 0
            )

    def runs_without_shards(self) -> list[RunRecord]:
        """Non-final runs nobody has cut into shards yet (admitted by ``agac run``)."""
        s = t.shards
        with self._read() as conn:
            return [
                RunRecord.from_row(r)
                for r in conn.execute(
                    sa.select(t.runs)
                    .where(
                        t.runs.c.state.not_in(FINAL_STATES),
                        ~sa.exists().where(s.c.run_id == t.runs.c.id),
                    )
                    .order_by(t.runs.c.created_at)
                ).all()
            ]

    def claim_shard(self, *, worker: str, host: str, pid: int, ttl: float) -> Claim | None:
        """Claim the next ready shard of any open run, or None when there is none
        (PostgreSQL only: workers refuse other stores).

        Skipped: shards locked by another claim right now (SKIP LOCKED), shards whose lease
        is live, runs that are final, ``cancelling``, or held by a live run lease. Two
        statements in one transaction: pick and lock, then take the lease and mark the
        shard (the claim is the hot path of a fleet)."""
        started = time.perf_counter()
        now = self.clock.time()
        with self._write("claim a shard") as conn:
            # The run row is read FOR SHARE: ``fence_shards`` (agac run, finalization)
            # holds it FOR UPDATE after taking the run lease, so a claim and a run lease
            # are never both granted (see the module doc).
            row = conn.execute(_PICK_PG, {"now": now, "final": list(FINAL_STATES)}).first()
            if row is None:
                return None
            name = shard_lease(row.run_id, row.shard)
            took = conn.execute(
                _TAKE,
                {
                    "name": name,
                    "host": host,
                    "pid": pid,
                    "now": now,
                    "expires": now + ttl,
                    "worker": worker,
                    "run_id": row.run_id,
                    "shard": row.shard,
                },
            ).first()
            if took is None or took.token is None:
                return None
        claim = Claim(row, int(took.token), ttl, time.perf_counter() - started)
        claim.db_seconds = float(took.db_ended) - float(row.db_started)
        return claim

    def release_shard(self, claim: Claim, *, state: str, ready_at: float) -> bool:
        """Hand a shard back (``todo`` at ``ready_at``) or mark it ``done``; fenced: False
        (and nothing changed) when the lease was taken over meanwhile."""
        s, le = t.shards, t.leases
        with self._write("release a shard") as conn:
            res = conn.execute(
                le.update()
                .where(le.c.name == claim.lease_name, le.c.token == claim.token)
                .values(expires_at=0.0)
            )
            if res.rowcount != 1:
                return False
            # A shard woken while it was held (ready_at < 0) stays ready: what woke it
            # may have happened after this holder looked.
            conn.execute(
                s.update()
                .where(s.c.run_id == claim.run_id, s.c.shard == claim.shard)
                .values(
                    state=state,
                    updated_at=self.clock.time(),
                    ready_at=sa.case((s.c.ready_at < 0, 0.0), else_=ready_at),
                )
            )
            if state == "todo" and ready_at <= self.clock.time():
                self.hooks.notify(conn)
        return True

    def wake_shards(
        self, run_id: str, *, kind: str, file: str | None = None, action: str | None = None
    ) -> int:
        """Make a run's waiting shards ready now (a batch was read, items were staged).
        ``ready_at = -1`` marks them woken, so a holder handing one back keeps it ready."""
        s = t.shards
        cond = [s.c.run_id == run_id, s.c.kind == kind, s.c.state == "todo"]
        if file is not None:
            cond.append(s.c.file == file)
        if action is not None:
            cond.append(s.c.action == action)
        with self._write("wake shards") as conn:
            n = int(conn.execute(s.update().where(*cond).values(ready_at=-1.0)).rowcount or 0)
            if n:
                self.hooks.notify(conn)
        return n

    def shards_left(self, run_id: str, kind: str = "online") -> int:
        s = t.shards
        with self._read() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count())
                    .select_from(s)
                    .where(s.c.run_id == run_id, s.c.kind == kind, s.c.state != "done")
                ).scalar()
                or 0
            )

    def has_shards(self, run_id: str) -> bool:
        with self._read() as conn:
            return (
                conn.execute(
                    sa.select(t.shards.c.shard).where(t.shards.c.run_id == run_id).limit(1)
                ).first()
                is not None
            )

    def close_shards(self, run_id: str) -> None:
        """A final run's shards are all done."""
        with self._write("close the run's shards") as conn:
            conn.execute(
                t.shards.update()
                .where(t.shards.c.run_id == run_id)
                .values(state="done", updated_at=self.clock.time())
            )

    def fence_shards(self, run_id: str) -> list[Row]:
        """Called by the holder of the run lease ``run:<run>``: with the run row locked FOR
        UPDATE, fence every expired shard lease of the run (its token moves on, so a paused
        owner can never write again) and return the live ones (empty: the run is ours)."""
        le, s = t.leases, t.shards
        now = self.clock.time()
        prefix = f"shard:{run_id}:"
        with self._write("check the run's shard leases") as conn:
            conn.execute(self.hooks.for_update(sa.select(t.runs.c.id).where(t.runs.c.id == run_id)))
            conn.execute(
                le.update()
                .where(le.c.name.startswith(prefix, autoescape=True), le.c.expires_at <= now)
                .values(token=le.c.token + 1, expires_at=0.0)
            )
            live = conn.execute(
                sa.select(s.c.shard, s.c.owner, le.c.host, le.c.pid, le.c.expires_at)
                .join(le, le.c.name == sa.literal(prefix) + s.c.shard)
                .where(s.c.run_id == run_id, le.c.expires_at > now)
            ).all()
        return list(live)

    def shard_owners(self, run_id: str) -> list[Row]:
        """Every shard of a run with its state, last owner and lease (for ``agac status``)."""
        s, le = t.shards, t.leases
        name = sa.literal("shard:") + s.c.run_id + sa.literal(":") + s.c.shard
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(s, le.c.host, le.c.pid, le.c.expires_at, le.c.token)
                    .outerjoin(le, le.c.name == name)
                    .where(s.c.run_id == run_id)
                    .order_by(s.c.kind, s.c.lo, s.c.shard)
                ).all()
            )

    # -- workers ----------------------------------------------------------------------

    def register_worker(
        self, worker: str, *, host: str, pid: int, concurrency: int, ttl: float
    ) -> None:
        now = self.clock.time()
        with self._write("register the worker") as conn:
            conn.execute(
                t.workers.insert().values(
                    id=worker,
                    host=host,
                    pid=pid,
                    concurrency=concurrency,
                    state="running",
                    started_at=now,
                    heartbeat_at=now,
                    expires_at=now + ttl,
                )
            )

    def worker_heartbeat(self, worker: str, *, ttl: float, state: str = "running") -> None:
        now = self.clock.time()
        with self._write("record the worker's heartbeat") as conn:
            conn.execute(
                t.workers.update()
                .where(t.workers.c.id == worker)
                .values(heartbeat_at=now, expires_at=now + ttl, state=state)
            )

    def end_worker(self, worker: str) -> None:
        with self._write("record the worker's end") as conn:
            conn.execute(
                t.workers.update()
                .where(t.workers.c.id == worker)
                .values(state="stopped", expires_at=0.0, heartbeat_at=self.clock.time())
            )

    def list_workers(
        self, *, live_only: bool = True, tenants: Tenants = None
    ) -> list[tuple[Row, list[Row]]]:
        """Workers (live ones by default), each with the shards it holds now — only those
        of runs of ``tenants`` when given (a worker serves every tenant; a person sees
        their own tenants' holdings, T2)."""
        w, s, le, r = t.workers, t.shards, t.leases, t.runs
        now = self.clock.time()
        name = sa.literal("shard:") + s.c.run_id + sa.literal(":") + s.c.shard
        with self._read() as conn:
            q = sa.select(w).order_by(w.c.started_at)
            if live_only:
                q = q.where(w.c.expires_at > now)
            rows = conn.execute(q).all()
            held = conn.execute(
                sa.select(s.c.owner, s.c.run_id, s.c.shard, s.c.kind, le.c.expires_at, r.c.tenant)
                .join(le, le.c.name == name)
                .join(r, r.c.id == s.c.run_id)
                .where(
                    le.c.expires_at > now,
                    s.c.owner.in_([x.id for x in rows]),
                    tenant_condition(tenants),
                )
            ).all()
        return [(x, [h for h in held if h.owner == x.id]) for x in rows]

    # -- global rate windows -----------------------------------------------------------

    def rate_take(
        self, key: str, *, window: float, rpm: float | None, tpm: float | None, tokens: int
    ) -> float:
        """Take one request (and ``tokens``) from the sliding window ``key``, shared by every
        process on this store. Returns 0.0 when taken, else the seconds until there may be
        room (nothing is taken)."""
        ev = t.rate_events
        with self._write("take from a rate window") as conn:
            conn.execute(
                self.hooks.insert(t.rate_limits)
                .values(key=key, updated_at=0.0)
                .on_conflict_do_nothing()
            )
            conn.execute(
                self.hooks.for_update(
                    sa.select(t.rate_limits.c.key).where(t.rate_limits.c.key == key)
                )
            )
            now = self.hooks.now(conn, self.clock)
            conn.execute(ev.delete().where(ev.c.key == key, ev.c.at <= now - window))
            used = conn.execute(
                sa.select(
                    sa.func.coalesce(sa.func.sum(ev.c.requests), 0),
                    sa.func.coalesce(sa.func.sum(ev.c.tokens), 0),
                ).where(ev.c.key == key)
            ).one()
            wait = 0.0
            if rpm and used[0] + 1 > rpm:
                # the oldest request that must leave the window before one more fits
                nth = conn.execute(
                    sa.select(ev.c.at)
                    .where(ev.c.key == key, ev.c.requests > 0)
                    .order_by(ev.c.at)
                    .offset(max(0, int(used[0] + 1 - rpm) - 1))
                    .limit(1)
                ).scalar()
                wait = max(wait, (float(nth) if nth is not None else now) + window - now)
            if tpm and used[1] > 0 and used[1] + tokens > tpm:
                oldest = conn.execute(
                    sa.select(sa.func.min(ev.c.at)).where(ev.c.key == key)
                ).scalar()
                wait = max(wait, (float(oldest) if oldest is not None else now) + window - now)
            if wait > 0:
                return max(wait, 0.001)
            conn.execute(ev.insert().values(key=key, at=now, requests=1, tokens=tokens))
            conn.execute(
                t.rate_limits.update().where(t.rate_limits.c.key == key).values(updated_at=now)
            )
            return 0.0

    def rate_adjust(self, key: str, tokens: int) -> None:
        """Correct a window's tokens with a call's real usage."""
        with self._write("correct a rate window") as conn:
            conn.execute(
                t.rate_events.insert().values(
                    key=key, at=self.hooks.now(conn, self.clock), requests=0, tokens=tokens
                )
            )

    # -- shared budgets (R5 in worker mode) ------------------------------------------------

    def run_spending(
        self, run_id: str, *, after_id: int, upto_id: int
    ) -> tuple[float, int, float, int, int, float]:
        """A run's usage rows with ``id > after_id``: USD and tokens of those with ``id <=
        upto_id``, USD and tokens of the rest, the largest id seen, and the database's
        clock. Reading only rows after a settled id keeps the read small in a long run."""
        u = t.usage
        tokens = u.c.input_tokens + u.c.cached_tokens + u.c.cache_write_tokens + u.c.output_tokens
        early = u.c.id <= upto_id
        with self._write("read the run's spending") as conn:
            row = conn.execute(
                sa.select(
                    sa.func.coalesce(sa.func.sum(sa.case((early, u.c.cost_usd), else_=0.0)), 0.0),
                    sa.func.coalesce(sa.func.sum(sa.case((early, tokens), else_=0)), 0),
                    sa.func.coalesce(sa.func.sum(sa.case((early, 0.0), else_=u.c.cost_usd)), 0.0),
                    sa.func.coalesce(sa.func.sum(sa.case((early, 0), else_=tokens)), 0),
                    sa.func.coalesce(sa.func.max(u.c.id), after_id),
                ).where(u.c.run_id == run_id, u.c.id > after_id)
            ).one()
            now = self.hooks.now(conn, self.clock)
        return float(row[0]), int(row[1]), float(row[2]), int(row[3]), int(row[4]), now

    def budget_refused(self, run_id: str) -> bool:
        """Whether a batch part of the run was not sent because its budget had no room (a
        ``budget_exhausted`` event): the run's budget is exhausted for every shard."""
        e = t.events
        with self._read("read the run's events") as conn:
            return (
                conn.execute(
                    sa.select(e.c.id)
                    .where(e.c.run_id == run_id, e.c.kind == "budget_exhausted")
                    .limit(1)
                ).first()
                is not None
            )

    # -- the work channel ------------------------------------------------------------------

    def notify_work(self) -> None:
        with self._write("announce work") as conn:
            self.hooks.notify(conn)

    def work_listener(self) -> WorkListener:
        return WorkListener(self.engine)


class WorkListener:
    """A dedicated connection that LISTENs on the work channel (PostgreSQL)."""

    def __init__(self, engine: Any) -> None:
        raw = engine.raw_connection()
        self._conn = raw.driver_connection
        raw.detach()  # ours for the worker's life, never returned to the pool
        self._raw = raw
        self._conn.rollback()
        self._conn.autocommit = True
        self._conn.execute(f"LISTEN {WORK_CHANNEL}")

    def wait(self, timeout: float) -> bool:
        """Block until work is announced (True) or ``timeout`` seconds pass (False)."""
        try:
            for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                return True
        except Exception:  # noqa: BLE001 - a lost listener only costs the poll fallback
            time.sleep(min(timeout, 1.0))
        return False

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a dead connection
            self._raw.close()
