"""What ``agac status`` says of a run: its summary, plus who runs it (a run marked running
that no worker shares), the store it read (when the command named none) and, for a run
that workers share, who holds its shards. The service's
run page adds when the run started and ended."""

from __future__ import annotations

from dataclasses import dataclass, field

from agac.engine.report.jsondoc import ABSENT_WHEN_EMPTY, ABSENT_WHEN_NONE, INLINED, JSONView
from agac.engine.report.run import RunSummary

__all__ = ["RunPage", "RunProcess", "ShardRow", "StatusReport", "StoreRead"]


@dataclass(frozen=True)
class StoreRead:
    """The store a command read (``url`` with any password hidden) and where that came
    from (``source``: ``AGAC_STORE``, ``agac.yml`` or ``default``)."""

    url: str
    source: str


@dataclass(frozen=True)
class RunProcess:
    """Who runs a run marked running, by its lease: the holder's host and pid (None when
    none ever took it), when the lease runs out, and whether that process is ``live``."""

    host: str | None
    pid: int | None
    lease_expires_at: float | None
    live: bool


@dataclass(frozen=True)
class ShardRow:
    """A shard of a run workers share: its state, its owner (a live lease) or last owner."""

    shard: int
    kind: str
    action: str | None
    file: str | None
    records: tuple[int, int]
    state: str
    owner: str | None
    last_owner: str | None
    owner_host: str | None
    owner_pid: int | None
    claims: int


@dataclass(frozen=True, eq=False)
class StatusReport(JSONView):
    """``agac status``: the run's summary, who runs it (a run marked running that no
    worker shares), the store read, the shards."""

    summary: RunSummary = field(metadata=INLINED)
    process: RunProcess | None = field(default=None, metadata=ABSENT_WHEN_NONE)
    store: StoreRead | None = field(default=None, metadata=ABSENT_WHEN_NONE)
    shards: tuple[ShardRow, ...] = field(default=(), metadata=ABSENT_WHEN_EMPTY)


@dataclass(frozen=True, eq=False)
class RunPage(JSONView):
    """A run as the service shows it (``GET /api/v1/runs/{id}``, its page): the status
    and when it started and ended."""

    status: StatusReport = field(metadata=INLINED)
    started: float | None = None
    ended: float | None = None
