"""The store's vocabulary and the typed values it hands out.

Statuses, origins, states and reasons are ``Literal`` types (docs/guarantees.md, Runs; docs/cli.md, agac status; docs/guarantees.md, Reason codes), so a
misspelt one is a type error, not a silent bucket. A run comes out of the store as a
:class:`RunRecord`: its options decoded once into :class:`RunSettings`, its config
decoded once, and its tenant (T2), which never changes once admitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

from agac.jsontext import dumps, loads
from agac.reasons import Reason
from agac.tenants import DEFAULT_TENANT

__all__ = [
    "DEFAULT_TENANT",
    "FINAL_STATES",
    "OPEN_BATCH_STATES",
    "BatchItem",
    "BatchRecord",
    "BatchState",
    "Budget",
    "ItemStatus",
    "Origin",
    "OutcomeRecord",
    "OutcomeStatus",
    "Reason",
    "RunRecord",
    "RunSettings",
    "RunState",
    "Spent",
    "UnitOutcome",
]

RunState = Literal[
    "queued",
    "running",
    "waiting",
    "awaiting_approval",
    "cancelling",
    "succeeded",
    "partial",
    "failed",
    "timed_out",
    "exhausted",
    "cancelled",
]
FINAL_STATES: tuple[RunState, ...] = (
    "succeeded",
    "partial",
    "failed",
    "timed_out",
    "exhausted",
    "cancelled",
)
"""A run in one of these states never changes again (docs/guarantees.md, Runs)."""

OutcomeStatus = Literal["answered", "failed", "skipped"]
"""The bucket of a settled unit (docs/cli.md, agac status); a unit without an outcome is pending."""

Origin = Literal["call", "reused", "carried"]
"""How a unit got its outcome: this run paid for it, found it stored (S5, an adopted
batch), or carried it from the run it continues or retries (R1, R2)."""

# Reason codes of failed and skipped units have one registry, agac/reasons.py (with
# what each means for the run: ``halts``, ``carries_over``, ``ends_run``).

BatchState = Literal[
    "submitting",
    "unknown",
    "submitted",
    "running",
    "cancelling",
    "ended",
    "collected",
    "refused",
    "expired",
    "cancelled",
    "abandoned",
    "not_cancelled",
    "not_submitted",
    "failed",
]
OPEN_BATCH_STATES: tuple[BatchState, ...] = (
    "submitting",
    "unknown",
    "submitted",
    "running",
    "cancelling",
    "ended",
)
"""A batch in these states still owes its items an answer (``ended`` = not yet read)."""

ItemStatus = Literal["pending", "succeeded", "retry", "not_submitted", "failed", "turn"]
"""``turn``: the answer asked for tool calls; the turn is stored in the unit's loop (table
``turns``) and the next round sends the conversation on."""
"""A batch item: waiting (staged or out), read with an answer, to be sent again, failed."""


@dataclass(frozen=True, slots=True)
class Budget:
    """A run's cap (R5): USD, tokens, or both."""

    usd: float | None = None
    tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"usd": self.usd, "tokens": self.tokens}


@dataclass(frozen=True, slots=True)
class Spent:
    """USD and tokens spent (by the runs a retry retries, R2)."""

    usd: float = 0.0
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class RunSettings:
    """A run's stored options, decoded once: the input limit, the previous final run whose
    failures may be carried (R1 c), the per-run settings it was admitted with
    (``--run-mode``, …), its budget and deadline, what the runs it retries spent, and
    when ``agac gc`` pruned it."""

    limit: int | None = None
    prior: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    budget: Budget | None = None
    deadline_at: float | None = None
    spent_before: Spent = Spent()
    pruned: float | None = None
    unit_keys: str | None = None
    """``escaped`` when the run's unit keys escape record keys (agac/keys.py); a run
    admitted before that wrote keys holding ``/`` or ``%`` as they were."""
    live_at: dict[str, float] = field(default_factory=dict)
    """B13: per batch action with ``hybrid``, the instant (epoch seconds) its records still
    in batches go live, computed once at admission (R4)."""
    start_at: dict[str, float] = field(default_factory=dict)
    """Per online action ``run_mode: auto`` holds for its model's cheaper hours, the
    instant (epoch seconds) its first call may go, computed once at admission."""

    @classmethod
    def from_json(cls, text: str | None) -> RunSettings:
        d = loads(text) or {}
        budget = d.get("budget")
        spent = d.get("spent_before") or {}
        return cls(
            limit=d.get("limit"),
            prior=d.get("prior"),
            overrides=dict(d.get("overrides") or {}),
            budget=Budget(budget.get("usd"), budget.get("tokens")) if budget else None,
            deadline_at=d.get("deadline_at"),
            spent_before=Spent(float(spent.get("usd", 0.0)), int(spent.get("tokens", 0))),
            pruned=d.get("pruned"),
            unit_keys=d.get("unit_keys"),
            live_at={str(k): float(v) for k, v in (d.get("live_at") or {}).items()},
            start_at={str(k): float(v) for k, v in (d.get("start_at") or {}).items()},
        )

    def to_json(self) -> str:
        d: dict[str, Any] = {"limit": self.limit, "prior": self.prior, "overrides": self.overrides}
        if self.budget is not None:
            d["budget"] = self.budget.to_dict()
        if self.deadline_at is not None:
            d["deadline_at"] = self.deadline_at
        if self.spent_before != Spent():
            d["spent_before"] = {"usd": self.spent_before.usd, "tokens": self.spent_before.tokens}
        if self.pruned is not None:
            d["pruned"] = self.pruned
        if self.unit_keys is not None:
            d["unit_keys"] = self.unit_keys
        if self.live_at:
            d["live_at"] = self.live_at
        if self.start_at:
            d["start_at"] = self.start_at
        return dumps(d)

    def pruned_at(self, when: float) -> RunSettings:
        return replace(self, pruned=when)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run as the store holds it (table ``runs``)."""

    id: str
    workflow: str
    workflow_path: str
    state: RunState
    retry_of: str | None
    config: dict[str, Any]
    """The resolved workflow it was admitted with (``Workflow.snapshot()``), decoded."""
    config_hash: str
    snapshot_id: str
    fresh: bool
    settings: RunSettings
    error: str | None
    created_at: float
    updated_at: float
    ended_at: float | None
    tenant: str = DEFAULT_TENANT
    """The tenant the run was admitted in (T2): its batches, effects, proposals, usage,
    answers and tool results are that tenant's."""

    @classmethod
    def from_row(cls, row: Any) -> RunRecord:
        return cls(
            id=row.id,
            workflow=row.workflow,
            workflow_path=row.workflow_path,
            state=row.state,
            retry_of=row.retry_of,
            config=loads(row.config),
            config_hash=row.config_hash,
            snapshot_id=row.snapshot_id,
            fresh=bool(row.fresh),
            settings=RunSettings.from_json(row.options),
            error=row.error,
            created_at=row.created_at,
            updated_at=row.updated_at,
            ended_at=row.ended_at,
            tenant=row.tenant,
        )

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def action_names(self) -> list[str]:
        return [a["name"] for a in self.config["actions"]]

    def deadline_passed(self, now: float) -> bool:
        """R4: the run's deadline, if it has one, is behind ``now``."""
        at = self.settings.deadline_at
        return at is not None and now >= at


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One provider batch as the store holds it (table ``batches``): its shard (workflow,
    action, file, part), the provider's id and state, who sent and who read it, and the
    adapter's ``meta`` decoded once."""

    key: str
    workflow: str
    action: str
    file: str
    part: int
    provider: str
    provider_batch_id: str | None
    state: BatchState
    raw_status: str | None
    run_id: str
    collected_by: str | None
    request_count: int
    meta: dict[str, Any]
    error: str | None
    created_at: float
    submitted_at: float | None
    ended_at: float | None
    deadline_at: float | None
    updated_at: float
    tenant: str = DEFAULT_TENANT

    @classmethod
    def from_row(cls, row: Any) -> BatchRecord:
        return cls(
            key=row.key,
            workflow=row.workflow,
            action=row.action,
            file=row.file,
            part=row.part,
            provider=row.provider,
            provider_batch_id=row.provider_batch_id,
            state=row.state,
            raw_status=row.raw_status,
            run_id=row.run_id,
            collected_by=row.collected_by,
            request_count=row.request_count,
            meta=loads(row.meta) or {},
            error=row.error,
            created_at=row.created_at,
            submitted_at=row.submitted_at,
            ended_at=row.ended_at,
            deadline_at=row.deadline_at,
            updated_at=row.updated_at,
            tenant=row.tenant,
        )

    @property
    def open(self) -> bool:
        """Whether it still owes its items an answer."""
        return self.state in OPEN_BATCH_STATES


class BatchItem(NamedTuple):
    """One batch item (table ``batch_items``): a unit's request in a batch, or staged for
    one; read for a unit, with its batch's state, sender and reader (``batch_state`` None:
    staged, no batch yet). A named tuple: a batch's items are read by the ten thousand."""

    batch_key: str
    custom_id: str
    workflow: str
    action: str
    unit_key: str
    file: str
    fingerprint: str
    attempt: int
    request: str
    status: ItemStatus
    reason: str | None
    detail: str | None
    tenant: str = DEFAULT_TENANT
    batch_state: BatchState | None = None
    batch_run: str | None = None
    collected_by: str | None = None
    provider_batch_id: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> BatchItem:
        """An item row (its columns in the table's order, then its batch's state, sender,
        reader and provider id when the read joined them)."""
        return tuple.__new__(cls, row) if len(row) == len(cls._fields) else cls(*row)


class OutcomeRecord(NamedTuple):
    """A unit's outcome as the store holds it (table ``outcomes``); ``output`` is its JSON
    text, decoded where it is used (most reads never look at it)."""

    run_id: str
    action: str
    unit_key: str
    seq: int
    status: OutcomeStatus
    reason: str | None
    detail: str | None
    origin: Origin
    fingerprint: str | None
    output: str | None
    attempts: int
    updated_at: float
    checks: str | None = None
    """Each check's verdict, JSON name → passed (None: the action has no checks)."""

    @classmethod
    def from_row(cls, row: Any) -> OutcomeRecord:
        """An ``outcomes`` row, its columns in the table's order."""
        return tuple.__new__(cls, row)


class UnitOutcome(NamedTuple):
    """An outcome a bulk transition gives one unit (engine/transitions.py), before the
    store writes it."""

    action: str
    unit_key: str
    status: OutcomeStatus
    reason: str
    detail: str
