"""The effects half of the repository API (a mixin of :class:`agac.store.repository.Store`).

One row per idempotency key (E1), which starts with the effect's tenant (T2). States: ``started`` (the intent, written before the
call, S1), ``succeeded`` (with its receipt), ``failed`` (the function raised),
``unknown`` (a crash left an intent without a receipt, E2), ``done`` / ``not_done``
(resolved by a person), ``compensated`` (its compensation ran on request).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agac.store import tables as t
from agac.store.core import StoreCore
from agac.store.runs import Tenants, tenant_condition

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

__all__ = ["UNSETTLED_EFFECT_STATES", "EffectRepository"]

UNSETTLED_EFFECT_STATES = ("started", "unknown")
"""An effect in these states may or may not have happened."""


class EffectRepository(StoreCore):
    def get_effect(self, key: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(sa.select(t.effects).where(t.effects.c.key == key)).first()

    def find_effect(self, ref: str, *, tenants: Collection[str]) -> list[Row]:
        """Effects of ``tenants`` whose key, or whose key after its ``<tenant>:`` start, is
        ``ref`` or starts with it (at most two)."""
        e = t.effects
        starts = [e.c.key.startswith(f"{tenant}:{ref}", autoescape=True) for tenant in tenants]
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(e)
                    .where(
                        tenant_condition(tenants, e.c.tenant),
                        sa.or_(e.c.key.startswith(ref, autoescape=True), *starts),
                    )
                    .limit(2)
                ).all()
            )

    def start_effect(
        self, row: dict[str, Any], *, lease: tuple[str, int, float] | None = None
    ) -> None:
        """S1: the intent (``started``) is durable before the call; replaces an earlier
        row of the same key that did not succeed. With ``lease`` (the run's or the shard's),
        the write is refused (LeaseLost) once another process holds it (S3), so a process
        that lost its run can never start an effect the new owner starts too."""
        now = self.clock.time()
        row = {
            **row,
            "state": "started",
            "receipt": None,
            "error": None,
            "resolution": None,
            "created_at": now,
            "updated_at": now,
        }
        with self._write("record the effect intent") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            conn.execute(t.effects.delete().where(t.effects.c.key == row["key"]))
            conn.execute(t.effects.insert().values(**row))

    def update_effect(
        self, key: str, *, lease: tuple[str, int, float] | None = None, **fields: Any
    ) -> None:
        fields["updated_at"] = self.clock.time()
        with self._write("update the effect") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            conn.execute(t.effects.update().where(t.effects.c.key == key).values(**fields))

    def list_effects(
        self,
        workflow: str | None = None,
        *,
        tenants: Tenants,
        states: tuple[str, ...] | None = None,
    ) -> list[Row]:
        """Effects of ``tenants`` (None: every tenant's), oldest first."""
        e = t.effects
        q = sa.select(e).where(tenant_condition(tenants, e.c.tenant)).order_by(e.c.created_at)
        if workflow:
            q = q.where(e.c.workflow == workflow)
        if states:
            q = q.where(e.c.state.in_(states))
        with self._read() as conn:
            return list(conn.execute(q).all())
