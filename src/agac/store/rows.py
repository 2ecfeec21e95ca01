"""The rows the engine hands the store to write, as typed values.

Each row is an immutable named tuple whose fields are its table's columns (by name, in
the table's order, the ``tenant`` column aside): the store maps fields to columns once per
row type (:meth:`agac.store.core.StoreCore._bulk`), so a row never becomes a dict keyed by
column names on its way in, and a column added to a table with a server default needs no
field. Named tuples rather than dataclasses because one is made per unit and per call:
a tuple is built, and bound to the driver, at the cost of its values.

A :class:`Checkpoint` is one group of them, written in one fenced transaction
(:meth:`agac.store.outcomes.OutcomeRepository.checkpoint`); the rows that carry their
run's tenant (answers, tool results, usage, batch items, priced) take the checkpoint's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from agac.tenants import DEFAULT_TENANT

__all__ = [
    "AnswerRow",
    "BatchIntent",
    "Checkpoint",
    "EventRow",
    "FanoutRow",
    "ItemResult",
    "MarkRow",
    "OutcomeRow",
    "PricedRow",
    "RecordRow",
    "RecordSpan",
    "StagedItem",
    "ToolResultRow",
    "TurnRow",
    "UsageRow",
    "UsageTotal",
]


class RecordRow(NamedTuple):
    """One record of an input snapshot (table ``records``): its key, where it came from,
    its payload as JSON text, or the reason it is invalid."""

    snapshot_id: str
    seq: int
    key: str
    file: str
    n: int
    line: int
    payload: str | None
    reason: str | None
    error: str | None


class RecordSpan(NamedTuple):
    """Consecutive valid records of one file, written as a bulk append (table
    ``records``): record ``i`` has seq ``seq + i``, position ``n + i``, no line, key
    ``keys[i]`` and payload ``payloads[i]`` (JSON text)."""

    seq: int
    file: str
    n: int
    keys: Sequence[str]
    payloads: Sequence[str]
    ascending: bool = False
    """Each key sorts after the one before (so none repeats within the span)."""


class OutcomeRow(NamedTuple):
    """A unit's outcome (table ``outcomes``): its bucket, reason, how it got it, and its
    output as JSON text (None where the answer row holds it, see ``AnswerRow``)."""

    run_id: str
    action: str
    unit_key: str
    seq: int
    status: str
    reason: str | None
    detail: str | None
    origin: str
    fingerprint: str | None
    output: str | None
    attempts: int
    updated_at: float
    checks: str | None = None
    """Each check's verdict, JSON name → passed (None: the action has no checks)."""


class AnswerRow(NamedTuple):
    """An answer stored under its request's fingerprint (S5, table ``answers``)."""

    fingerprint: str
    provider: str
    model: str
    request: str
    response: str
    output: str
    created_at: float


class ToolResultRow(NamedTuple):
    """A tool's cached result by (function, inputs) (table ``tool_results``)."""

    input_hash: str
    function: str
    output: str
    created_at: float


class TurnRow(NamedTuple):
    """One step of a unit's tool loop (table ``turns``): a model turn that called tools
    (``kind = 'model'``) or one call's result (``'tool'``); ``body`` is JSON text."""

    run_id: str
    action: str
    unit_key: str
    step: int
    kind: str
    body: str
    created_at: float


class UsageRow(NamedTuple):
    """One call (or tool invocation) in the cost ledger (table ``usage``).

    ``reasoning_tokens`` are a part of ``output_tokens``; ``server_tools`` is the
    provider's billed tool uses as compact JSON (``{"web_search": 2}``, None for none);
    ``request_id`` the provider's id of the call, for its support; ``served_by`` the
    upstream provider a router sent the call to (OpenRouter), None for a direct call."""

    run_id: str
    action: str
    unit_key: str
    attempt: int
    kind: str
    provider: str
    model: str
    tier: str
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: float
    latency_ms: float
    status: str
    error: str | None
    fingerprint: str | None
    created_at: float
    origin: str | None = None
    reasoning_tokens: int = 0
    server_tools: str | None = None
    request_id: str | None = None
    served_by: str | None = None


class EventRow(NamedTuple):
    """One event of a run (table ``events``); ``data`` is JSON text."""

    run_id: str
    kind: str
    action: str | None
    unit_key: str | None
    data: str
    created_at: float


class StagedItem(NamedTuple):
    """A batch item (table ``batch_items``): staged under ``staged:<run>:<action>:<file>``
    until its batch's intent takes it."""

    batch_key: str
    custom_id: str
    workflow: str
    action: str
    unit_key: str
    file: str
    fingerprint: str
    attempt: int
    request: str
    status: str = "pending"
    reason: str | None = None
    detail: str | None = None


class FanoutRow(NamedTuple):
    """How many items a parent fanned out into (table ``fanouts``)."""

    run_id: str
    action: str
    parent_key: str
    seq: int
    items: int
    created_at: float


class MarkRow(NamedTuple):
    """A dispatch mark (S1, table ``dispatch_marks``): the units of one (run, action,
    shard) that may be sent, as JSON text (store/marks.py ``decode_units``)."""

    run_id: str
    action: str
    shard: str
    units: str
    updated_at: float


class PricedRow(NamedTuple):
    """The real usage of a request whose earlier call's outcome is unknown (§8): given to
    that call's ``unknown`` usage rows of the same fingerprint."""

    fingerprint: str
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: float


class ItemResult(NamedTuple):
    """What was read for one batch item: its status, reason and detail."""

    batch_key: str
    custom_id: str
    status: str
    reason: str | None = None
    detail: str | None = None


class BatchIntent(NamedTuple):
    """A batch about to be submitted (S1): recorded with its items before the provider is
    asked; the store writes it ``submitting`` (table ``batches``)."""

    key: str
    workflow: str
    action: str
    file: str
    part: int
    provider: str
    run_id: str
    request_count: int
    created_at: float
    tenant: str


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One group of progress, written atomically after the fencing check (S1, S3)."""

    tenant: str = DEFAULT_TENANT
    outcomes: Sequence[OutcomeRow] = ()
    answers: Sequence[AnswerRow] = ()
    tool_results: Sequence[ToolResultRow] = ()
    usage: Sequence[UsageRow] = ()
    events: Sequence[EventRow] = ()
    batch_items: Sequence[StagedItem] = ()
    fanouts: Sequence[FanoutRow] = ()
    item_results: Sequence[ItemResult] = ()
    marks: Sequence[MarkRow] = ()
    priced: Sequence[PricedRow] = ()


class UsageTotal(NamedTuple):
    """The cost ledger summed over one (action, kind, provider, model, tier, origin) group
    — and long-context ``band`` when asked (:meth:`Store.usage_totals`): its calls, how many
    of its ``unknown`` calls a later answer priced (S1), how many rows are ``estimated``
    (billed in a batch agac did not read), its tokens and its cost."""

    action: str
    kind: str
    provider: str | None
    model: str | None
    tier: str
    origin: str | None
    calls: int
    priced: int
    estimated: int
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost_usd: float
    band: int = 0
