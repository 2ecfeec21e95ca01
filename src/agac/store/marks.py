"""Dispatch marks and the usage of calls whose outcome is unknown (a mixin of
:class:`agac.store.repository.Store`; S1 and §8).

A mark row per (run, action, shard) lists the units that may have been sent and have no
durable outcome yet, each with its request fingerprint and worst case. The engine
rewrites a row inside the group commit that must be durable before those units are
sent. Whoever next opens the run turns every listed unit that still has no outcome into
a usage row with ``origin = 'unknown'`` at its worst case, and clears the marks, in one
transaction. A later answer to the same request gives that row its real usage
(``status`` ``unknown`` → ``priced``); it stays a call of its own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa

from agac.store import tables as t
from agac.store.core import StoreCore
from agac.store.rows import MarkRow, PricedRow, UsageRow

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Row

__all__ = [
    "MARK_UPSERT",
    "UNKNOWN_ORIGIN",
    "MarkRepository",
    "decode_units",
    "price_unknown",
    "write_marks",
]

UNKNOWN_ORIGIN = "unknown"
"""``usage.origin`` (and, until priced, ``usage.status``) of a call whose outcome is unknown."""
MARK_UPSERT = (
    "ON CONFLICT (run_id, action, shard) DO UPDATE SET units = excluded.units, "
    "updated_at = excluded.updated_at"
)


def decode_units(text: str) -> list[tuple[str, str, int, int, float]]:
    """A mark row's units: (unit key, fingerprint, input tokens, output tokens, worst USD)."""
    return [(str(k), str(fp), int(i), int(o), float(usd)) for k, fp, i, o, usd in json.loads(text)]


def write_marks(core: StoreCore, conn: Connection, marks: Sequence[MarkRow]) -> None:
    """Inside a checkpoint: write (or rewrite) these mark rows."""
    core._bulk(conn, t.dispatch_marks, marks, MARK_UPSERT)


def price_unknown(conn: Connection, priced: Sequence[PricedRow], tenant: str) -> None:
    """Inside a checkpoint: give ``unknown`` rows of these fingerprints real usage, in
    ``tenant`` only (T2)."""
    u = t.usage
    for p in priced:
        conn.execute(
            u.update()
            .where(
                u.c.origin == UNKNOWN_ORIGIN,
                u.c.status == UNKNOWN_ORIGIN,
                u.c.fingerprint == p.fingerprint,
                u.c.tenant == tenant,
            )
            .values(
                input_tokens=p.input_tokens,
                cached_tokens=p.cached_tokens,
                cache_write_tokens=p.cache_write_tokens,
                output_tokens=p.output_tokens,
                cost_usd=p.cost_usd,
                status="priced",
            )
        )


class MarkRepository(StoreCore):
    def dispatch_marks(self, run_id: str, shards: Sequence[str] | None = None) -> list[Row]:
        m = t.dispatch_marks
        q = sa.select(m).where(m.c.run_id == run_id)
        if shards is not None:
            q = q.where(m.c.shard.in_(list(shards)))
        with self._read() as conn:
            return list(conn.execute(q.order_by(m.c.action, m.c.shard)).all())

    def settled_units(self, run_id: str, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of these (action, unit key) have an outcome in ``run_id``."""
        o = t.outcomes
        found: set[tuple[str, str]] = set()
        by_action: dict[str, list[str]] = {}
        for action, key in keys:
            by_action.setdefault(action, []).append(key)
        with self._read() as conn:
            for action, unit_keys in by_action.items():
                for i in range(0, len(unit_keys), 500):
                    rows = conn.execute(
                        sa.select(o.c.unit_key).where(
                            o.c.run_id == run_id,
                            o.c.action == action,
                            o.c.unit_key.in_(unit_keys[i : i + 500]),
                        )
                    ).all()
                    found.update((action, r.unit_key) for r in rows)
        return found

    def twin_usage(self, fingerprints: Sequence[str], *, tenant: str) -> dict[str, Row]:
        """For each fingerprint, the usage of a settled call of ``tenant`` that got an answer
        to that request (the latest), if any."""
        u = t.usage
        out: dict[str, Row] = {}
        fps = list(dict.fromkeys(fingerprints))
        with self._read() as conn:
            for i in range(0, len(fps), 500):
                rows = conn.execute(
                    sa.select(u)
                    .where(
                        u.c.fingerprint.in_(fps[i : i + 500]),
                        u.c.tenant == tenant,
                        u.c.kind == "llm",
                        u.c.status == "ok",
                        u.c.origin.is_(None),
                    )
                    .order_by(u.c.id)
                ).all()
                out.update((r.fingerprint, r) for r in rows)
        return out

    def account_lost_calls(
        self,
        run_id: str,
        usage: Sequence[UsageRow],
        tenant: str,
        shards: Sequence[str] | None,
        lease: tuple[str, int, float] | None,
    ) -> None:
        """Write the ``unknown`` usage rows and clear the marks they came from, at once."""
        m = t.dispatch_marks
        with self._write("count calls whose outcome is unknown") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            self._bulk(conn, t.usage, usage, tenant=tenant)
            q = m.delete().where(m.c.run_id == run_id)
            if shards is not None:
                q = q.where(m.c.shard.in_(list(shards)))
            conn.execute(q)

    def clear_marks(
        self,
        run_id: str,
        shards: Sequence[str] | None = None,
        lease: tuple[str, int, float] | None = None,
    ) -> None:
        """Forget the marks of a run (of ``shards``): every call they list has settled."""
        m = t.dispatch_marks
        with self._write("clear dispatch marks") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            q = m.delete().where(m.c.run_id == run_id)
            if shards is not None:
                q = q.where(m.c.shard.in_(list(shards)))
            conn.execute(q)

    def unpriced_unknown(self, workflow: str, *, tenant: str) -> set[str]:
        """Fingerprints of the tenant's ``unknown`` calls of the workflow still at their
        worst case."""
        u, r = t.usage, t.runs
        with self._read() as conn:
            rows = conn.execute(
                sa.select(u.c.fingerprint)
                .distinct()
                .select_from(u.join(r, r.c.id == u.c.run_id))
                .where(
                    u.c.origin == UNKNOWN_ORIGIN,
                    u.c.status == UNKNOWN_ORIGIN,
                    r.c.workflow == workflow,
                    r.c.tenant == tenant,
                    u.c.fingerprint.is_not(None),
                )
            ).all()
        return {row.fingerprint for row in rows}
