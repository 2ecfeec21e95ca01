"""What a unit may call: the narrow interfaces between the record walk and the rooms that
serve it (docs/architecture.md: the run loop drives the walk, the walk drives a unit, a unit reports
through these — nothing below calls back into what drives it).

- :class:`Outcomes` — write a unit's outcome, usage and events (engine/outcomes/writer.py);
- :class:`Lookups` — stored answers and tool results by key (the store gateway);
- :class:`BatchUnits` — a batch action's units: their batch items, and staging or adopting
  what their decision says (engine/batch/units.py);
- :class:`Approvals` — the gate of an action with ``approval:`` (engine/approvals/gate.py);
- :class:`Effects` — a tool action marked ``effect:`` (engine/approvals/effects.py);
- :class:`Turns` — the durable steps of an llm action's tool loop (engine/outcomes/turns.py);
- :class:`UnitContext` — all of the above for one run, with its control flags, budget and
  the shard's prefetched requests and carried failures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

from agac.engine.decision import CarriedFailure
from agac.tools.invoke import LoadedTool, ToolOutcome

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from agac.engine.actions import ActionRuntime
    from agac.engine.context import ToolContext
    from agac.engine.decision import Settle
    from agac.engine.limits.budget import BudgetGuard
    from agac.engine.outcomes.dispatch import Dispatch
    from agac.engine.values import RunControl, Settled, UnitRecord
    from agac.jsontext import JSON, JSONObject
    from agac.providers.base import Request, Response
    from agac.store.rows import AnswerRow, StagedItem, ToolResultRow, TurnRow, UsageRow
    from agac.store.values import BatchItem, Origin, OutcomeStatus

__all__ = [
    "Act",
    "Approvals",
    "BatchUnits",
    "CarriedFailure",
    "Effects",
    "InFlight",
    "Lookups",
    "LoopEffect",
    "Marks",
    "Outcomes",
    "Prefetched",
    "ShardMemory",
    "Turns",
    "UnitContext",
]


class Outcomes(Protocol):
    """Where a unit's results go (see :class:`agac.engine.outcomes.writer.OutcomeWriter`)."""

    async def settle(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        status: OutcomeStatus,
        reason: str | None = None,
        detail: str | None = None,
        *,
        output: JSON = None,
        origin: Origin = "call",
        fingerprint: str | None = None,
        attempts: int = 0,
        answers: Sequence[AnswerRow] = (),
        usage: Sequence[UsageRow] = (),
        tool_results: Sequence[ToolResultRow] = (),
        traceback_text: str | None = None,
        output_json: str | None = None,
        on_durable: Callable[[], None] | None = None,
        checks: str | None = None,
    ) -> Settled: ...

    def decided(
        self, rt: ActionRuntime, rec: UnitRecord, d: Settle
    ) -> Coroutine[object, None, Settled]: ...

    async def event(
        self, kind: str, action: str | None = None, key: str | None = None, **data: JSON
    ) -> None: ...

    def usage_row(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        attempt: int,
        request: Request,
        response: Response | None,
        error: BaseException | None,
        started: float,
        fp: str,
    ) -> UsageRow: ...

    def leg_rows(
        self,
        rt: ActionRuntime,
        run_id: str,
        unit_key: str,
        attempt: int,
        fp: str,
        response: Response,
        tier: str = "live",
    ) -> list[UsageRow]:
        """The ledger rows of the earlier legs of a continued (paused) turn."""

    async def record_call(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        attempt: int,
        request: Request,
        response: Response | None,
        error: BaseException,
        started: float,
        fp: str,
    ) -> None: ...

    async def record_judge(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        attempt: int,
        request: Request,
        response: Response | None,
        error: BaseException | None,
        started: float,
        fp: str,
        answer: AnswerRow | None,
    ) -> None:
        """Ledger a judge's call (origin ``judge``) and store its verdict, now."""

    async def keep_answer(
        self, rt: ActionRuntime, answers: Sequence[AnswerRow], usage: Sequence[UsageRow]
    ) -> None:
        """Store an answer and its usage now, before the unit's outcome (an answer to be
        judged)."""

    def tool_usage_row(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        attempt: int,
        started: float,
        error: str | None,
        input_hash: str,
    ) -> UsageRow: ...

    async def record_tool(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        attempt: int,
        started: float,
        error: str,
        input_hash: str,
    ) -> None: ...

    def stage(self, items: Sequence[StagedItem]) -> None: ...

    def redact(self, text: str) -> str:
        """``text`` (a tool's exception or traceback) with secrets taken out."""

    def fanned_out(
        self, fan: str, parent: UnitRecord, items: int, actions: Iterable[str]
    ) -> None: ...


class Marks(Protocol):
    """Dispatch marks (S1, engine/outcomes/marks.py): a unit's call is listed in the
    store before it is sent. The call is one :class:`~agac.engine.outcomes.dispatch.
    Dispatch` from its first wait for a slot to its last release."""

    def expect(self, entry: Dispatch) -> None:
        """Before waiting for a slot: the unit may be sent soon (``entry.request``)."""

    async def send(self, entry: Dispatch) -> None:
        """Holding the slot, just before the call: returns once the unit is listed durably."""

    def release(self, entry: Dispatch) -> None:
        """After the slot is given back: the unit's call settled, or it was not sent."""


class Lookups(Protocol):
    """Stored answers (S5) and tool results by key, coalesced into one query per group."""

    async def lookup_answer(self, fingerprint: str) -> str | None: ...

    async def lookup_tool_result(self, input_hash: str) -> str | None: ...


class BatchUnits(Protocol):
    """The batch side of a batch action's units (engine/batch/units.py): the facts their
    decision reads, and staging or adopting what it says."""

    async def prefetch(self, keys: list[str]) -> None:
        """Read the batch items of these records' units (a shard's) ahead of their units."""

    def forget(self, keys: list[str]) -> None:
        """Drop what :meth:`prefetch` read for these records (their shard is done)."""

    async def settle_ahead(
        self,
        rt: ActionRuntime,
        records: Sequence[UnitRecord],
        existing: dict[tuple[str, str], Settled],
        memory: ShardMemory,
    ) -> set[str]:
        """A first step's batch units decided for a whole shard at once: the keys of the
        records whose walk stops there."""

    def items_of(self, rt: ActionRuntime, key: str) -> Sequence[BatchItem]:
        """Every batch item of the unit (any batch, staged included)."""

    async def own_answer(self, fingerprint: str) -> str | None:
        """The answer of an item this run read."""

    def adopt(self, batches: Iterable[str]) -> None:
        """B0: units still wait on these batches out."""

    def stage(
        self, rt: ActionRuntime, rec: UnitRecord, request_json: str, fp: str, attempt: int
    ) -> None:
        """Stage the unit for the action's next batch."""

    def judge_round(self, action: str, check: str) -> ActionRuntime | None:
        """The batch round a check's judge is asked in (None: asked live)."""

    def repair_round(self, action: str) -> ActionRuntime | None:
        """The batch round the action's repairs are asked in (None: asked live)."""


@dataclass(frozen=True, slots=True)
class Act:
    """The approval gate's go: act now with these inputs (a tool's) or this request (an
    llm action's approved one)."""

    view: JSONObject
    request: Request | None = None


class Approvals(Protocol):
    async def gate(
        self, ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, view: JSONObject
    ) -> Settled | Act | None:
        """Settled: the unit's outcome; Act: go on with these arguments; None: it waits."""


LoopEffectState = Literal["succeeded", "failed", "unknown", "reused", "not_called"]


@dataclass(frozen=True)
class LoopEffect:
    """One effect tool call of a tool loop: what the model is told (None: the unit waits
    on a person, its effect unknown — E2) and the effect's state after the call:
    ``succeeded``, ``failed`` (the function raised), ``unknown`` (a crash or a timeout
    between its intent and its receipt), ``reused`` (done before: its receipt is told) or
    ``not_called`` (the arguments were refused before any intent)."""

    outcome: ToolOutcome | None
    state: LoopEffectState


class Effects(Protocol):
    async def run(
        self,
        ctx: UnitContext,
        rt: ActionRuntime,
        rec: UnitRecord,
        inputs_json: str,
        input_hash: str,
        key: str,
    ) -> Settled | None: ...

    async def tool_call(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        tool: LoadedTool,
        arguments: str,
        key: str,
        tool_ctx: ToolContext,
    ) -> LoopEffect:
        """One call of an effect tool of ``rec``'s tool loop (E1, E2)."""


class Turns(Protocol):
    """The steps of a unit's tool loop, stored one by one before the next is taken."""

    async def load(self, action: str, unit_key: str) -> list[TurnRow]:
        """The unit's stored steps in this run, in order."""

    async def adopt(
        self, workflow: str, action: str, unit_key: str, fingerprints: frozenset[str]
    ) -> list[TurnRow]:
        """The unit's loop of the latest earlier run whose first turn sent one of
        ``fingerprints``, carried into this run (its steps stored here); none without."""

    async def write(
        self, action: str, unit_key: str, step: int, kind: str, body: str, usage: Sequence[UsageRow]
    ) -> None:
        """Store one step with the ledger rows of what it cost; returns once durable."""


class Prefetched(NamedTuple):
    """A unit's request rendered ahead of it (a shard's first steps): the request, its
    canonical JSON, its fingerprint and the answer stored under it (None: none)."""

    request: Request
    request_json: str
    fingerprint: str
    stored: str | None


class InFlight(Protocol):
    """A unit whose call is in flight (single-flight, S5), as an identical one sees it."""

    def shared(self) -> asyncio.Future[Settled]:
        """Its result, for a unit sharing it (the future is made on the first ask: most
        calls are shared by nobody)."""
        ...


@dataclass
class ShardMemory:
    """What the walk prepared for the units of the shards in flight: requests rendered
    ahead with their stored answers, failures carried from the previous run (R1 c), and
    the calls in flight (single-flight, S5). Filled and emptied by the walk a shard at a
    time (engine/walk/shards.py); a unit takes its own entries."""

    prefetched: dict[tuple[str, str], Prefetched] = field(default_factory=dict)
    carried: dict[tuple[str, str], CarriedFailure] = field(default_factory=dict)
    inflight: dict[str, InFlight] = field(default_factory=dict)
    """Fingerprint -> the unit whose call of it is in flight (S5)."""

    def take_prefetched(self, action: str, key: str) -> Prefetched | None:
        """The unit's request rendered ahead, if any; it is the unit's alone from now."""
        return self.prefetched.pop((action, key), None)


@dataclass(frozen=True)
class UnitContext:
    """Everything a unit of one run may use, and nothing that drives it."""

    run_id: str
    workflow: str
    tenant: str
    """The run's tenant (T2): its effect keys start with it (E1)."""
    fresh: bool
    control: RunControl
    out: Outcomes
    lookups: Lookups
    memory: ShardMemory
    effects: Effects
    budget: BudgetGuard | None = None
    batch: BatchUnits | None = None
    approvals: Approvals | None = None
    marks: Marks | None = None
    turns: Turns | None = None
    """Where an llm action's tool loops keep their steps (None: no action has tools)."""
