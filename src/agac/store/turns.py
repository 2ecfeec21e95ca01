"""The turns half of the repository API (a mixin of :class:`agac.store.repository.Store`):
the durable steps of a unit's tool loop (table ``turns``, migration 0016).

A step is written with the ledger rows of what it cost, in one fenced transaction (S3):
a model turn with its call's usage, a tool result with its invocation's. A step already
stored is kept as it is (``ON CONFLICT DO NOTHING``): a step is written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa

from agac.jsontext import loads
from agac.store import tables as t
from agac.store.batches import write_item_results
from agac.store.core import StoreCore

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from agac.store.rows import ItemResult, TurnRow, UsageRow

__all__ = ["TurnRepository"]


class TurnRepository(StoreCore):
    def put_turns(
        self,
        tenant: str,
        turns: Sequence[TurnRow],
        usage: Sequence[UsageRow] = (),
        *,
        item_results: Sequence[ItemResult] = (),
        lease: tuple[str, int, float] | None = None,
    ) -> None:
        """Store steps of tool loops and their ledger rows, for the run holding ``lease``;
        with ``item_results``, the batch items that brought the turns marked read in the
        same transaction (a turn read from a batch is never stored without its item read,
        nor ledgered twice)."""
        with self._write("store a tool loop's turn") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            self._bulk(conn, t.turns, turns, "ON CONFLICT DO NOTHING", tenant=tenant)
            self._bulk(conn, t.usage, usage, tenant=tenant)
            if item_results:
                write_item_results(conn, self.hooks.param, item_results)

    def turns_of(self, run_id: str, action: str, unit_key: str) -> list[Row]:
        """A unit's stored steps in a run, in order."""
        c = t.turns.c
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.turns)
                    .where(c.run_id == run_id, c.action == action, c.unit_key == unit_key)
                    .order_by(c.step)
                ).all()
            )

    def earlier_runs(self, tenant: str, workflow: str, run_id: str) -> list[str]:
        """The ids of the tenant's other runs of the workflow, the latest first."""
        r = t.runs.c
        with self._read() as conn:
            rows = conn.execute(
                sa.select(r.id)
                .where(r.tenant == tenant, r.workflow == workflow, r.id != run_id)
                .order_by(r.created_at.desc())
            ).all()
        return [row[0] for row in rows]

    def earlier_turns(
        self, run_ids: Sequence[str], action: str, unit_key: str, fingerprints: frozenset[str]
    ) -> list[Row]:
        """The steps of the unit's loop in the first of ``run_ids`` whose loop's first turn
        sent one of ``fingerprints`` (the unit's first request); none when no run has
        such a loop. Each run is looked up by its key (the table's primary key)."""
        c = t.turns.c
        with self._read() as conn:
            firsts = {
                row.run_id: row.body
                for row in conn.execute(
                    sa.select(c.run_id, c.body).where(
                        c.run_id.in_(list(run_ids)),
                        c.action == action,
                        c.unit_key == unit_key,
                        c.step == 0,
                    )
                ).all()
            }
        for run_id in run_ids:
            body = loads(firsts[run_id]) if run_id in firsts else None
            if isinstance(body, dict) and body.get("fingerprint") in fingerprints:
                return self.turns_of(run_id, action, unit_key)
        return []

    def turn_counts(self, run_id: str) -> dict[tuple[str, str], tuple[int, int]]:
        """(action, unit key) -> (model turns that called tools, tool results) of a run's
        tool loops."""
        c = t.turns.c
        model = sa.func.sum(sa.case((c.kind == "model", 1), else_=0))
        tool = sa.func.sum(sa.case((c.kind == "tool", 1), else_=0))
        with self._read() as conn:
            rows = conn.execute(
                sa.select(c.action, c.unit_key, model, tool)
                .where(c.run_id == run_id)
                .group_by(c.action, c.unit_key)
            ).all()
        return {(r[0], r[1]): (int(r[2] or 0), int(r[3] or 0)) for r in rows}
