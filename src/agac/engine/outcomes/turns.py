"""The durable steps of tool loops (table ``turns``): what a unit's loop reads when it
starts, and where each step goes before the next is taken.

A step is written with the ledger rows of what it cost in one fenced store call (S3),
outside the group commits: a loop waits for its step anyway, and steps are few beside
outcomes. What a step cost counts in the run's progress once it is durable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agac.store.rows import TurnRow

if TYPE_CHECKING:
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.outcomes.writer import OutcomeWriter
    from agac.store.repository import Store
    from agac.store.rows import UsageRow

__all__ = ["StoredStep", "TurnLog"]


class StoredStep(TurnRow):
    """A step as read back (the same fields as the row written)."""


class TurnLog:
    """One run's (or worker shard's) tool-loop steps, through its store gateway."""

    def __init__(
        self, run_id: str, tenant: str, store: Store, gateway: StoreGateway, out: OutcomeWriter
    ) -> None:
        self.run_id, self.tenant = run_id, tenant
        self.store, self.gateway, self.out = store, gateway, out
        self._earlier: list[str] | None = None

    async def load(self, action: str, unit_key: str) -> list[TurnRow]:
        """The unit's stored steps in this run, in order."""
        rows = await self.gateway.call(self.store.turns_of, self.run_id, action, unit_key)
        return [
            TurnRow(r.run_id, r.action, r.unit_key, r.step, r.kind, r.body, r.created_at)
            for r in rows
        ]

    async def adopt(
        self, workflow: str, action: str, unit_key: str, fingerprints: frozenset[str]
    ) -> list[TurnRow]:
        """The unit's loop carried over from the latest earlier run whose first turn sent
        one of ``fingerprints``: its steps stored in this run (their cost was ledgered
        where they were taken) and returned; none when there is no such loop."""
        if self._earlier is None:  # the workflow's other runs, looked up once
            self._earlier = await self.gateway.call(
                self.store.earlier_runs, self.tenant, workflow, self.run_id
            )
        if not self._earlier:
            return []
        rows = await self.gateway.call(
            self.store.earlier_turns, self._earlier, action, unit_key, fingerprints
        )
        steps = tuple(
            TurnRow(self.run_id, action, unit_key, r.step, r.kind, r.body, r.created_at)
            for r in rows
        )
        if steps:
            await self.gateway.call(
                self.store.put_turns, self.tenant, steps, (), lease=self.gateway.fence
            )
        return list(steps)

    async def write(
        self, action: str, unit_key: str, step: int, kind: str, body: str, usage: Sequence[UsageRow]
    ) -> None:
        """Store one step with its ledger rows; returns once they are durable."""
        row = TurnRow(self.run_id, action, unit_key, step, kind, body, self.out.clock.time())
        await self.gateway.call(
            self.store.put_turns, self.tenant, (row,), usage, lease=self.gateway.fence
        )
        cost = sum(u.cost_usd for u in usage)
        if cost:
            self.out.progress.spent(action, cost)
