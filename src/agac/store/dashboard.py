"""Reads for the people who watch runs (T5, T6), a mixin of
:class:`agac.store.repository.Store`.

Every read that lists runs, or objects of runs, takes ``tenants`` — the caller's tenants,
or None for every tenant — and limits itself through :func:`agac.store.runs.tenant_condition`,
so paging and counting happen in SQL on what the caller may see.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agac.store import tables as t
from agac.store.core import StoreCore
from agac.store.runs import Tenants, tenant_condition
from agac.store.values import RunRecord

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

__all__ = ["DashboardRepository"]


class DashboardRepository(StoreCore):
    def runs_page(
        self,
        tenants: Tenants,
        *,
        workflow: str | None = None,
        state: Sequence[str] | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> tuple[list[RunRecord], int]:
        """Runs newest first, with the number of runs that match in all."""
        r = t.runs
        cond = [tenant_condition(tenants)]
        if workflow:
            cond.append(r.c.workflow == workflow)
        if state:
            cond.append(r.c.state.in_(list(state)))
        with self._read() as conn:
            total = int(
                conn.execute(sa.select(sa.func.count()).select_from(r).where(*cond)).scalar() or 0
            )
            # The page's ids first, sorting narrow rows (not every run's config), then the rows.
            ids = [
                row[0]
                for row in conn.execute(
                    sa.select(r.c.id)
                    .where(*cond)
                    .order_by(r.c.created_at.desc(), r.c.id.desc())
                    .offset(offset)
                    .limit(limit)
                ).all()
            ]
            found = (
                {row.id: row for row in conn.execute(sa.select(r).where(r.c.id.in_(ids))).all()}
                if ids
                else {}
            )
        return [RunRecord.from_row(found[i]) for i in ids if i in found], total

    def workflow_names(self, tenants: Tenants) -> list[str]:
        r = t.runs
        with self._read() as conn:
            return [
                row[0]
                for row in conn.execute(
                    sa.select(r.c.workflow)
                    .where(tenant_condition(tenants))
                    .distinct()
                    .order_by(r.c.workflow)
                ).all()
            ]

    def tenant_names(self) -> list[str]:
        """Every tenant that has a run, sorted."""
        r = t.runs
        with self._read() as conn:
            return [
                row[0]
                for row in conn.execute(sa.select(r.c.tenant).distinct().order_by(r.c.tenant)).all()
            ]

    def record_counts(self, snapshot_ids: Sequence[str]) -> dict[str, int]:
        s = t.snapshots
        if not snapshot_ids:
            return {}
        with self._read() as conn:
            return {
                row.id: int(row.record_count)
                for row in conn.execute(
                    sa.select(s.c.id, s.c.record_count).where(s.c.id.in_(list(set(snapshot_ids))))
                ).all()
            }

    def status_counts(self, run_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        """run -> status -> units, for the runs given."""
        o = t.outcomes
        out: dict[str, dict[str, int]] = {r: {} for r in run_ids}
        if not run_ids:
            return out
        with self._read() as conn:
            for row in conn.execute(
                sa.select(o.c.run_id, o.c.status, sa.func.count().label("n"))
                .where(o.c.run_id.in_(list(run_ids)))
                .group_by(o.c.run_id, o.c.status)
            ).all():
                out[row.run_id][row.status] = int(row.n)
        return out

    def run_costs(self, run_ids: Sequence[str]) -> dict[str, float]:
        u = t.usage
        if not run_ids:
            return {}
        with self._read() as conn:
            return {
                row.run_id: float(row.c or 0.0)
                for row in conn.execute(
                    sa.select(u.c.run_id, sa.func.sum(u.c.cost_usd).label("c"))
                    .where(u.c.run_id.in_(list(run_ids)))
                    .group_by(u.c.run_id)
                ).all()
            }

    def latest_events(self, run_ids: Sequence[str], kind: str) -> dict[str, Row]:
        """run -> its newest event of ``kind``, for the runs that have one."""
        e = t.events
        out: dict[str, Row] = {}
        with self._read() as conn:
            for run_id in run_ids:
                row = conn.execute(
                    sa.select(e)
                    .where(e.c.run_id == run_id, e.c.kind == kind)
                    .order_by(e.c.id.desc())
                    .limit(1)
                ).first()
                if row is not None:
                    out[run_id] = row
        return out

    def last_event_id(self) -> int:
        with self._read() as conn:
            return int(conn.execute(sa.select(sa.func.max(t.events.c.id))).scalar() or 0)

    def runs_with_events_after(self, run_ids: Sequence[str], after: int) -> dict[str, int]:
        """run -> its newest event id, for the runs given that have events after ``after``."""
        e = t.events
        if not run_ids:
            return {}
        with self._read() as conn:
            return {
                row.run_id: int(row.last)
                for row in conn.execute(
                    sa.select(e.c.run_id, sa.func.max(e.c.id).label("last"))
                    .where(e.c.id > after, e.c.run_id.in_(list(run_ids)))
                    .group_by(e.c.run_id)
                ).all()
            }

    def failure_groups(self, run_id: str, *, keys: int = 5) -> list[dict[str, Any]]:
        """A run's failed units grouped by (action, reason): how many, the first failure's
        message, and the first ``keys`` unit keys, in record order."""
        o = t.outcomes
        out = []
        with self._read() as conn:
            groups = conn.execute(
                sa.select(o.c.action, o.c.reason, sa.func.count().label("n"))
                .where(o.c.run_id == run_id, o.c.status == "failed")
                .group_by(o.c.action, o.c.reason)
                .order_by(sa.func.count().desc(), o.c.action, o.c.reason)
            ).all()
            for g in groups:
                first = conn.execute(
                    sa.select(o.c.unit_key, o.c.detail)
                    .where(
                        o.c.run_id == run_id,
                        o.c.status == "failed",
                        o.c.action == g.action,
                        o.c.reason == g.reason,
                    )
                    .order_by(o.c.seq, o.c.unit_key)
                    .limit(keys)
                ).all()
                out.append(
                    {
                        "action": g.action,
                        "reason": g.reason,
                        "count": int(g.n),
                        "message": first[0].detail if first else None,
                        "keys": [f.unit_key for f in first],
                    }
                )
        return out

    def run_batches(self, run_id: str, workflow: str, tenant: str) -> list[Row]:
        """The batches this run sent, and its tenant's batches of the workflow still out
        (which it may adopt, B0)."""
        from agac.store.batches import OPEN_BATCH_STATES

        b = t.batches
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(b)
                    .where(
                        b.c.workflow == workflow,
                        b.c.tenant == tenant,
                        sa.or_(
                            b.c.run_id == run_id,
                            b.c.collected_by == run_id,
                            b.c.state.in_(OPEN_BATCH_STATES),
                        ),
                    )
                    .order_by(b.c.created_at, b.c.key)
                ).all()
            )

    def cost_series(self, tenants: Tenants, *, since: float, bucket: float) -> list[Row]:
        """Spending since ``since`` in buckets of ``bucket`` seconds: (bucket start,
        workflow, provider, model, calls, cost), for the runs of ``tenants``."""
        u, r = t.usage, t.runs
        step = sa.literal(float(bucket))
        start = (self.hooks.floor(u.c.created_at / step) * step).label("bucket")
        q = (
            sa.select(
                start,
                r.c.workflow,
                u.c.provider,
                u.c.model,
                sa.func.count().label("calls"),
                sa.func.sum(u.c.cost_usd).label("cost"),
            )
            .select_from(u.join(r, r.c.id == u.c.run_id))
            .where(u.c.created_at >= since, u.c.kind == "llm", tenant_condition(tenants))
            .group_by(start, r.c.workflow, u.c.provider, u.c.model)
            .order_by(start)
        )
        with self._read() as conn:
            return list(conn.execute(q).all())
