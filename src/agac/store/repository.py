"""The store's one repository API: every read and write of agac's state goes here.

:class:`Store` is composed of one part per concern — runs and leases
(:mod:`~agac.store.runs`), input snapshots (:mod:`~agac.store.snapshots`), outcomes,
answers and events (:mod:`~agac.store.outcomes`), batches (:mod:`~agac.store.batches`),
effects (:mod:`~agac.store.effects`), approvals (:mod:`~agac.store.approvals`), the
workers' claims and rate windows (:mod:`~agac.store.claims`), dispatch marks
(:mod:`~agac.store.marks`), users, tokens and web sessions (:mod:`~agac.store.people`)
the service's paged reads (:mod:`~agac.store.dashboard`), the review of a run's answers
(:mod:`~agac.store.review`) and the turns of tool loops
(:mod:`~agac.store.turns`) — over one shared
:class:`~agac.store.core.StoreCore` (engine, dialect hooks, clock, error guard).

The engine calls these methods from a single store thread (see
:mod:`agac.engine.outcomes.gateway`), never with inline SQL elsewhere. Writes that make
progress durable go through :meth:`Store.checkpoint`, one transaction that first checks
the caller's fencing token (S3) and fails closed (S2) on any error.
"""

from __future__ import annotations

from agac.store.approvals import ApprovalRepository
from agac.store.batches import BatchRepository
from agac.store.claims import ClaimRepository
from agac.store.dashboard import DashboardRepository
from agac.store.effects import EffectRepository
from agac.store.marks import MarkRepository
from agac.store.outcomes import OutcomeRepository
from agac.store.people import PeopleRepository
from agac.store.review import ReviewRepository
from agac.store.runs import RunRepository
from agac.store.snapshots import SnapshotRepository
from agac.store.turns import TurnRepository
from agac.store.values import FINAL_STATES

__all__ = ["FINAL_STATES", "Store"]


class Store(
    RunRepository,
    SnapshotRepository,
    OutcomeRepository,
    BatchRepository,
    EffectRepository,
    ApprovalRepository,
    ClaimRepository,
    MarkRepository,
    PeopleRepository,
    DashboardRepository,
    ReviewRepository,
    TurnRepository,
):
    """A connection to one agac store (SQLite file, PostgreSQL, or ``memory``):
    ``Store(url, migrate=True, clock=SYSTEM)``."""
