"""The approvals half of the repository API (a mixin of :class:`agac.store.repository.Store`).

One row per proposal (A1). States:

- ``pending``: waiting for a person;
- ``approved`` / ``rejected``: decided (``decided_by``, ``decided_at``, ``reason``,
  ``decision_signature``); ``used_by`` names the run that acted on the decision;
- ``expired``: nobody decided before ``expires_at``;
- ``superseded``: a revision (``parent`` = this id) or a proposal with other arguments
  for the same unit replaced it;
- ``withdrawn``: its run ended (cancel, deadline, ``--fresh``, a run ended by a policy);
- ``revoked``: approved, but its decider was no longer an approver when the run came
  to act (A3);
- ``altered``: its stored content no longer matched its hash and signature.

Every state change is a conditional UPDATE on the state it expects, so two decisions
racing on one proposal cannot both win. A proposal is its run's tenant's (T2): a unit's
proposals are looked up by (tenant, workflow, action, unit).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agac.store import tables as t
from agac.store.core import StoreCore
from agac.store.runs import Tenants, tenant_condition

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

__all__ = ["LIVE_APPROVAL_STATES", "STALE_APPROVAL_STATES", "ApprovalRepository"]

LIVE_APPROVAL_STATES = ("pending", "approved")
STALE_APPROVAL_STATES = ("superseded", "withdrawn", "revoked", "altered")


class ApprovalRepository(StoreCore):
    def insert_proposal(
        self, row: dict[str, Any], *, lease: tuple[str, int, float] | None = None
    ) -> None:
        """Store a new proposal. Earlier live proposals of the same unit that no run has
        acted on are superseded in the same transaction: a unit has one live proposal.
        ``lease``: the writing run's (or shard's) lease, checked in the same transaction (S3)."""
        a = t.approvals
        now = self.clock.time()
        with self._write("record the proposal") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            conn.execute(
                a.update()
                .where(
                    a.c.tenant == row["tenant"],
                    a.c.workflow == row["workflow"],
                    a.c.action == row["action"],
                    a.c.unit_key == row["unit_key"],
                    a.c.state.in_(LIVE_APPROVAL_STATES),
                    a.c.used_by.is_(None),
                )
                .values(state="superseded", updated_at=now)
            )
            conn.execute(a.insert().values(**row))

    def get_proposal(self, proposal_id: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(
                sa.select(t.approvals).where(t.approvals.c.id == proposal_id)
            ).first()

    def find_proposals(self, ref: str, *, tenants: Collection[str]) -> list[Row]:
        """Proposals of ``tenants`` whose id is ``ref`` or starts with it (at most two)."""
        a = t.approvals
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(a)
                    .where(
                        tenant_condition(tenants, a.c.tenant),
                        a.c.id.startswith(ref, autoescape=True),
                    )
                    .limit(2)
                ).all()
            )

    def unit_proposals(
        self, workflow: str, action: str, unit_key: str, *, tenant: str
    ) -> list[Row]:
        """Every proposal of one unit of the tenant's workflow, oldest first."""
        a = t.approvals
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(a)
                    .where(
                        a.c.tenant == tenant,
                        a.c.workflow == workflow,
                        a.c.action == action,
                        a.c.unit_key == unit_key,
                    )
                    .order_by(a.c.created_at, a.c.id)
                ).all()
            )

    def list_proposals(
        self,
        workflow: str | None = None,
        *,
        tenants: Tenants,
        states: Sequence[str] | None = None,
        run_id: str | None = None,
        limit: int | None = None,
    ) -> list[Row]:
        """Proposals of ``tenants`` (None: every tenant's), oldest first."""
        a = t.approvals
        q = (
            sa.select(a)
            .where(tenant_condition(tenants, a.c.tenant))
            .order_by(a.c.created_at, a.c.seq, a.c.id)
        )
        if workflow:
            q = q.where(a.c.workflow == workflow)
        if states:
            q = q.where(a.c.state.in_(list(states)))
        if run_id:
            q = q.where(a.c.run_id == run_id)
        if limit is not None:
            q = q.limit(limit)
        with self._read() as conn:
            return list(conn.execute(q).all())

    def count_proposals(self, run_id: str, states: Sequence[str]) -> dict[str, int]:
        """Per action: proposals of ``run_id`` in ``states``."""
        a = t.approvals
        with self._read() as conn:
            rows = conn.execute(
                sa.select(a.c.action, sa.func.count().label("n"))
                .where(a.c.run_id == run_id, a.c.state.in_(list(states)))
                .group_by(a.c.action)
            ).all()
        return {r.action: int(r.n) for r in rows}

    def change_proposal(
        self,
        proposal_id: str,
        expect: Sequence[str],
        *,
        content_hash: str | None = None,
        lease: tuple[str, int, float] | None = None,
        **fields: Any,
    ) -> bool:
        """Set ``fields`` only if the proposal is still in one of ``expect`` (and, when
        given, still has ``content_hash``); False when another change won the race. A run
        passes its ``lease`` (S3); a person's decision needs none (the condition is its guard)."""
        a = t.approvals
        cond = [a.c.id == proposal_id, a.c.state.in_(list(expect))]
        if content_hash is not None:
            cond.append(a.c.content_hash == content_hash)
        fields["updated_at"] = self.clock.time()
        with self._write("record the decision") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            return bool(conn.execute(a.update().where(*cond).values(**fields)).rowcount == 1)

    def revise_proposal(self, old_id: str, old_hash: str, new_row: dict[str, Any]) -> bool:
        """A2: the old proposal (still pending, unchanged) becomes ``superseded`` and its
        revision is stored, in one transaction; False when the old one was decided first."""
        a = t.approvals
        with self._write("record the revision") as conn:
            res = conn.execute(
                a.update()
                .where(a.c.id == old_id, a.c.state == "pending", a.c.content_hash == old_hash)
                .values(state="superseded", updated_at=self.clock.time())
            )
            if res.rowcount != 1:
                return False
            conn.execute(a.insert().values(**new_row))
            return True

    def use_proposal(
        self, proposal_id: str, run_id: str, *, lease: tuple[str, int, float] | None = None
    ) -> bool:
        """Record that ``run_id`` acts on this decision (S1: before it acts). True when it
        is this run's to act on: nobody used it yet, or this run did (a crash in between).
        ``lease``: the run's (or shard's) lease, checked in the same transaction (S3)."""
        a = t.approvals
        with self._write("record the use of an approval") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            res = conn.execute(
                a.update()
                .where(
                    a.c.id == proposal_id,
                    a.c.state.in_(("approved", "rejected", "expired")),
                    sa.or_(a.c.used_by.is_(None), a.c.used_by == run_id),
                )
                .values(used_by=run_id, used_at=self.clock.time(), updated_at=self.clock.time())
            )
            return bool(res.rowcount == 1)

    def adopt_proposal(
        self, proposal_id: str, run_id: str, *, lease: tuple[str, int, float] | None = None
    ) -> None:
        """A live proposal made by an earlier run now belongs to ``run_id``."""
        a = t.approvals
        with self._write("adopt the proposal") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            conn.execute(
                a.update()
                .where(a.c.id == proposal_id, a.c.state.in_(LIVE_APPROVAL_STATES))
                .values(run_id=run_id, updated_at=self.clock.time())
            )

    def withdraw_proposals(self, run_id: str, why: str) -> int:
        """The run ended: its proposals nobody acted on can no longer be approved."""
        a = t.approvals
        with self._write("withdraw the run's proposals") as conn:
            return int(
                conn.execute(
                    a.update()
                    .where(
                        a.c.run_id == run_id,
                        a.c.state.in_(LIVE_APPROVAL_STATES),
                        a.c.used_by.is_(None),
                    )
                    .values(state="withdrawn", reason=why, updated_at=self.clock.time())
                ).rowcount
            )
