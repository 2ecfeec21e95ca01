"""Reads for reviewing a run's answers in the service (docs/tutorials/quality.md, Review in a
browser), a mixin of :class:`agac.store.repository.Store`.

One action's units, filtered and paged in SQL — by status, reason, a check that failed and
a text search over the answer, the message, the key and the record — so a run of 20,000
records pages as fast as one of 20. The caller finds the run in its tenants first
(:func:`agac.api.team.visible_run`); these reads take the run's id as found.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from agac.jsontext import dumps
from agac.store import tables as t
from agac.store.core import StoreCore
from agac.store.values import OutcomeRecord

__all__ = ["AnswerFilter", "ReviewRepository"]

_CHUNK = 2000


@dataclass(frozen=True)
class AnswerFilter:
    """Which units of an action a review shows: each given part must hold (all of them).

    ``check``: the name of a check the unit's answer failed. ``search``: text found,
    case-insensitively, in the answer, the unit's message, its key or its record."""

    status: str | None = None
    reason: str | None = None
    check: str | None = None
    search: str | None = None


class ReviewRepository(StoreCore):
    def answers_page(
        self,
        run_id: str,
        snapshot_id: str,
        action: str,
        where: AnswerFilter,
        *,
        offset: int = 0,
        limit: int = 50,
    ) -> tuple[list[OutcomeRecord], int]:
        """One page of ``action``'s units that pass ``where``, in record order, and how many
        pass in all."""
        cond = _conditions(run_id, snapshot_id, action, where)
        o = t.outcomes
        with self._read() as conn:
            total = int(
                conn.execute(sa.select(sa.func.count()).select_from(o).where(*cond)).scalar() or 0
            )
            rows = conn.execute(
                sa.select(o)
                .where(*cond)
                .order_by(o.c.seq, o.c.unit_key)
                .offset(offset)
                .limit(limit)
            ).all()
        return [OutcomeRecord.from_row(r) for r in rows], total

    def iter_answers(
        self, run_id: str, snapshot_id: str, action: str, where: AnswerFilter
    ) -> Iterator[OutcomeRecord]:
        """Every unit of ``action`` that passes ``where``, in record order, streamed a chunk
        at a time (a download)."""
        o = t.outcomes
        cond = _conditions(run_id, snapshot_id, action, where)
        last, last_key = -1, ""
        while True:
            after = sa.or_(o.c.seq > last, sa.and_(o.c.seq == last, o.c.unit_key > last_key))
            with self._read() as conn:
                rows = conn.execute(
                    sa.select(o).where(*cond, after).order_by(o.c.seq, o.c.unit_key).limit(_CHUNK)
                ).all()
            yield from map(OutcomeRecord.from_row, rows)
            if len(rows) < _CHUNK:
                return
            last, last_key = rows[-1].seq, rows[-1].unit_key

    def unit_costs(self, run_id: str, action: str, keys: Sequence[str]) -> dict[str, float]:
        """Each unit's cost in the ledger (every call: attempts, repairs, judges)."""
        if not keys:
            return {}
        u = t.usage
        with self._read() as conn:
            rows = conn.execute(
                sa.select(u.c.unit_key, sa.func.sum(u.c.cost_usd))
                .where(u.c.run_id == run_id, u.c.action == action, u.c.unit_key.in_(list(keys)))
                .group_by(u.c.unit_key)
            ).all()
        return {str(k): float(c or 0.0) for k, c in rows}

    def reason_counts(self, run_id: str, action: str) -> list[tuple[str, str | None, int]]:
        """(status, reason, units) of ``action``'s units in a run."""
        o = t.outcomes
        with self._read() as conn:
            rows = conn.execute(
                sa.select(o.c.status, o.c.reason, sa.func.count())
                .where(o.c.run_id == run_id, o.c.action == action)
                .group_by(o.c.status, o.c.reason)
                .order_by(o.c.status, o.c.reason)
            ).all()
        return [(str(s), r, int(n)) for s, r, n in rows]


def _conditions(
    run_id: str, snapshot_id: str, action: str, where: AnswerFilter
) -> list[sa.ColumnElement[bool]]:
    o = t.outcomes
    cond: list[sa.ColumnElement[bool]] = [o.c.run_id == run_id, o.c.action == action]
    if where.status:
        cond.append(o.c.status == where.status)
    if where.reason:
        cond.append(o.c.reason == where.reason)
    if where.check:
        cond.append(_failed(where.check))
    if where.search:
        cond.append(_found(snapshot_id, where.search))
    return cond


def _failed(check: str) -> sa.ColumnElement[bool]:
    """The unit's verdicts (compact JSON, name → passed, as :func:`agac.jsontext.dumps`
    writes them) say ``check`` failed."""
    verdict = dumps(check) + ":false"
    column = t.outcomes.c.checks
    return sa.or_(
        column.startswith("{" + verdict, autoescape=True),
        column.contains("," + verdict, autoescape=True),
    )


def _found(snapshot_id: str, text: str) -> sa.ColumnElement[bool]:
    o, r = t.outcomes, t.records
    record: Any = (
        sa.select(r.c.seq)
        .where(r.c.snapshot_id == snapshot_id, r.c.key == o.c.unit_key)
        .where(r.c.payload.icontains(text, autoescape=True))
    )
    return sa.or_(
        o.c.output.icontains(text, autoescape=True),
        o.c.detail.icontains(text, autoescape=True),
        o.c.unit_key.icontains(text, autoescape=True),
        sa.exists(record),
    )
