"""What every part of a run's batch step works with: the run, the store (through the
gateway, fenced for a worker's batch shard), the outcome writer, the budget, the input
files, and the per-provider submission pacers (B12). Built once per run by the
assembly (engine/lifecycle/assembly.py) and handed to the submitter, the poller and
the coordinator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agac.providers.base import BatchHandle

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.interrupts import StopSignal
    from agac.engine.limits.budget import BudgetGuard
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.outcomes.writer import OutcomeWriter, Progress
    from agac.engine.values import RunControl
    from agac.engine.walk.steps import StepPlan
    from agac.jsontext import JSON
    from agac.store.repository import Store
    from agac.store.values import BatchRecord, RunRecord

__all__ = ["BatchContext", "CacheKeeper", "Pacer", "StepReport"]


T = TypeVar("T")


class StoreCall(Protocol):
    """A store call run in the store thread: ``await call(store.method, *args)``."""

    def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Awaitable[T]: ...


def handle_of(b: BatchRecord) -> BatchHandle:
    """The provider's handle of a batch it accepted (its id is known)."""
    assert b.provider_batch_id is not None, b.key
    return BatchHandle(b.provider, b.provider_batch_id, b.key, b.meta)


class Pacer(Protocol):
    """A submission window (``batch_submissions_per_minute``, B12): in this process, or
    shared by every worker through the store."""

    async def acquire(self, tokens: int, stop: StopSignal | None = None) -> float | None: ...


class CacheKeeper(Protocol):
    """The run's explicit context caches (engine/lifecycle/contextcaches.py): made ready
    for a batch action right before its batch is written, so every line names one that
    lives until the batch ends."""

    async def ready(self, rt: ActionRuntime) -> bool: ...


@dataclass
class StepReport:
    """``progressed``: something a unit can act on happened (results read, records failed),
    so the run walks its records again; submitting or adopting a batch is not that."""

    progressed: bool = False
    waiting: list[str] = field(default_factory=list)
    poll_interval: float = 300.0


@dataclass
class BatchContext:
    run: RunRecord
    store: Store
    gateway: StoreGateway
    out: OutcomeWriter
    control: RunControl
    plan: StepPlan
    files: list[dict[str, Any]]
    progress: Progress
    budget: BudgetGuard | None
    pacer: Callable[[str], Pacer | None]
    """The pacer of a provider, or None when it has no ``batch_submissions_per_minute``."""
    call: StoreCall
    """A store call in the store thread (a worker's batch shard renews its lease first)."""
    only_file: str | None = None
    """A worker's batch shard (action, file): submit, recover, poll and read only this
    file's batches; B4 still looks at every file of the action."""
    caches: CacheKeeper | None = None
    """The run's explicit context caches (None: a batch step built without them)."""
    refused_actions: set[str] = field(default_factory=set)
    """Batch actions whose submission the provider refused (B2): they fail as a whole."""

    @property
    def run_id(self) -> str:
        return self.run.id

    @property
    def workflow(self) -> str:
        return self.run.workflow

    @property
    def tenant(self) -> str:
        """The run's tenant: its batches are the only ones it adopts, polls or cancels (T2)."""
        return self.run.tenant

    @property
    def tenants(self) -> tuple[str]:
        return (self.run.tenant,)

    async def event(self, kind: str, action: str, **data: JSON) -> None:
        await self.out.event(kind, action, None, **data)
