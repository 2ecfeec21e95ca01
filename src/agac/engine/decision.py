"""The one decision about a unit (record x action): from what is known about it to what
happens to it — settled with an outcome, left pending, staged for a batch, adopted from a
batch out, handed to its approval gate or its effect, or sent.

:func:`decide` is pure: it reads a :class:`UnitFacts` and returns a :class:`Decision`.
Some facts cost work to learn (the view and its guard, the rendered request and its
fingerprint, a stored answer); they start :data:`NOT_YET`, and :func:`decide` asks for
the first one its rules reach (:class:`Need`), in the order the rules are checked, so a
unit that settles early never renders.

Every outcome a unit gets comes from one of these, and only these:

- this decision, applied by every path that reaches a unit: the online walk
  (engine/walk/units.py), the batch side (engine/batch/units.py: staging a shard's first
  step at once, a unit read from this run's own item) and a join's record and
  dependencies (engine/walk/walker.py);
- what follows a decision that lets the unit go (``CALL``, ``GATE``, ``EFFECT``), written
  unit by unit: the call's answer or failure (engine/walk/calls.py); the gate's refusals,
  a rejected or expired proposal (engine/approvals/gate.py); an effect's (engine/approvals/effects.py); a fan-out whose list is missing,
  ``fan_out_invalid`` (engine/walk/walker.py). Where those steps apply a rule of this
  module's they call it, so each is decided in one place: the skips before each attempt
  of a call (:func:`before_attempt`; :func:`breaker_skip` when a failure pauses the
  action), the gate's carried failure of the same subject (:func:`carried_failure`, rule
  7's) and its deadline and stop before a proposal (:func:`before_proposal`);
- the bulk transitions, each a pure function of engine/transitions.py that its store
  writer is held to by a property test: a fan-out parent's join (``join_outcome``), a
  run ending early (``close_unit``, ``Store.close_units``), outcomes carried to a new run
  (``carry``, ``Store.carry_run_outcomes``) or to a retry (``carry_for_retry``, ``Store.
  copy_outcomes``), a batch given up (``abandon``, ``Store.end_batch_unread``), and the
  units a batch read answers (``read_batch``, with this module's :func:`read_answer`,
  ``Store.settle_read_items``).

The rules, in order, each final for the unit:

1. the record is invalid -> ``failed`` with its reason where the action reads records
   (no dependencies), ``skipped upstream_failed`` below;
2. a dependency failed -> ``skipped upstream_failed``; one skipped -> skipped with its
   reason (a guard's skip flows down as ``guard``);
3. the run is stopping -> pending (the next run asks it);
4. the view cannot be rendered -> ``failed render_error`` (``prompt_too_large`` when
   it is over ``max_prompt_chars``); a file it attaches cannot be sent -> ``failed``
   with the attachment's reason; the guard is false ->
   ``skipped guard``; the action failed as a whole -> ``failed provider_error``; an
   action with ``approval:`` -> its gate;
5. a tool: an effect -> the effects room; a cached result (``cache``, not ``--fresh``)
   -> ``answered`` reused; the deadline passed -> ``skipped deadline``; else it is called;
6. a batch action with an item of this run's own that decides it (staged or out:
   pending; read by this run: its failure, or its answer — ``reused`` when its batch
   sent an identical request once for it, S5) -> that;
7. the request's failure in the previous run with the same fingerprint (R1 c) ->
   ``failed``, carried; an answer stored under the fingerprint (S5; ``--fresh`` reads
   only its own batches' answers) -> ``answered`` (``call`` when this run's batch paid
   for it, else ``reused``);
8. a batch action: staged by this run, or in a batch out (adopted, B0) -> pending; its
   last item read by this run failed -> ``failed``; the deadline passed, or the budget
   is exhausted -> skipped; else staged (the next attempt; after an item whose answer
   asked for tool calls, the first of the next round of its loop: ``Stage.continues``);
9. the action is paused (its provider unreachable: a burst of identical transport
   failures in this run) -> ``skipped provider_unreachable``; otherwise it is sent
   (single-flight, retries: engine/walk/calls.py).

A batch action that switched live in the run (``live``, B13: engine/batch/hybrid.py)
skips rule 8 and its own items decide only when this run read an answer from one
(rule 6): a unit still in a batch, staged, or failed in a batch is sent (rule 9).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

from agac.store.batches import SHARED_ITEM, staged_by
from agac.store.values import OPEN_BATCH_STATES

if TYPE_CHECKING:
    from agac.engine.values import Settled
    from agac.store.values import BatchItem, Origin, OutcomeStatus

__all__ = [
    "CALL",
    "EFFECT",
    "GATE",
    "NOT_YET",
    "ROUND_SPAN",
    "Adopt",
    "CarriedFailure",
    "Decision",
    "Need",
    "NotYet",
    "Pending",
    "Settle",
    "Stage",
    "UnitFacts",
    "before_attempt",
    "before_proposal",
    "breaker_skip",
    "budget_skip",
    "carried_failure",
    "deadline_skip",
    "decide",
    "first_seen",
    "own_item",
    "read_answer",
    "round_of",
    "round_try",
    "unreachable_skip",
]


class CarriedFailure(NamedTuple):
    """A unit's failure in the previous run, carried when its request is unchanged (R1 c)."""

    reason: str
    detail: str | None
    fingerprint: str


class NotYet(enum.Enum):
    """A fact not learned yet (it costs work: rendering, a lookup)."""

    NOT_YET = 0


NOT_YET = NotYet.NOT_YET


class Settle(NamedTuple):
    """The unit's outcome, as it is written."""

    status: OutcomeStatus
    reason: str | None = None
    detail: str | None = None
    origin: Origin = "call"
    fingerprint: str | None = None
    attempts: int = 0
    output_json: str | None = None
    """The answer's output as stored (JSON text), for ``answered``."""
    checks: str | None = None
    """Each check's verdict on that answer (engine/checks.py), set by the unit."""


class Pending(NamedTuple):
    """No outcome yet: the run is stopping, or the unit waits on a batch."""

    why: Literal["stopping", "batch", "unreadable", "held"]


_HELD = Pending("held")


class Adopt(NamedTuple):
    """Pending on batches out that hold the unit's request (B0): they are still needed."""

    batches: tuple[str, ...]


class Stage(NamedTuple):
    """Staged for the action's next batch, as attempt ``attempt``. ``continues``: the
    unit's last item read here asked for tool calls; what is staged is the next turn of
    its loop (its calls run first, engine/walk/toolloop.py), a round of the batch loop."""

    attempt: int
    continues: bool = False


ROUND_SPAN = 100
"""Item attempts per round of a batch tool loop: round ``r`` (from 0) tries attempts
``r * ROUND_SPAN + 1`` onwards, so a unit's items stay ordered by attempt across rounds
and each round has the action's ``max_attempts`` of its own (:func:`round_try`)."""


def round_of(attempt: int) -> int:
    """Which round of a batch tool loop an item's attempt belongs to (1 for the first)."""
    return (attempt - 1) // ROUND_SPAN + 1


def round_try(attempt: int) -> int:
    """Which try of its round an item's attempt is (1 for a round's first)."""
    return (attempt - 1) % ROUND_SPAN + 1


class Need(NamedTuple):
    """The decision needs a fact it does not have yet."""

    fact: Literal["view", "request", "answer", "own_answer"]


class _Go(NamedTuple):
    what: Literal["call", "gate", "effect"]


CALL = _Go("call")
"""Send it: an llm call (single-flight, retries) or the tool's call."""
GATE = _Go("gate")
"""Its approval gate decides (A1): it settles, waits, or lets the unit act."""
EFFECT = _Go("effect")
"""A tool with ``effect:``: the effects room decides (E1, E2)."""

Decision = Settle | Pending | Adopt | Stage | Need | _Go

_STOPPING = Pending("stopping")
_WAITING = Pending("batch")
_NEED_VIEW = Need("view")
_NEED_REQUEST = Need("request")
_NEED_ANSWER = Need("answer")
_NEED_OWN = Need("own_answer")


class UnitFacts:
    """What is known about one unit, filled by the path that decides it; :func:`decide`
    only reads it. Facts that cost work start :data:`NOT_YET`."""

    __slots__ = (
        "action_failed",
        "action_paused",
        "attachment_error",
        "batch",
        "budget_exhausted",
        "cache",
        "carried",
        "deadline_passed",
        "effect",
        "fingerprint",
        "fresh",
        "gated",
        "guard",
        "guard_text",
        "held",
        "inputs_error",
        "items",
        "kind",
        "live",
        "own_answer",
        "reads_records",
        "record_error",
        "record_reason",
        "render_error",
        "render_reason",
        "run_id",
        "stopping",
        "stored",
        "upstream",
    )

    def __init__(
        self,
        run_id: str,
        *,
        kind: str = "llm",
        reads_records: bool = True,
        record_reason: str | None = None,
        record_error: str | None = None,
        upstream: Sequence[tuple[str, Settled | None]] = (),
        stopping: bool = False,
        guard: bool | None | NotYet = None,
        guard_text: str | None = None,
        action_failed: str | None = None,
        action_paused: str | None = None,
        gated: bool = False,
        effect: bool = False,
        cache: bool = True,
        fresh: bool = False,
        batch: bool = False,
        items: Sequence[BatchItem] = (),
        carried: CarriedFailure | None = None,
        fingerprint: str | NotYet = NOT_YET,
        stored: str | None | NotYet = NOT_YET,
        deadline_passed: bool = False,
        budget_exhausted: bool = False,
        live: bool = False,
        held: bool = False,
    ) -> None:
        self.run_id = run_id
        self.held = held
        """``run_mode: auto`` holds the action for its model's cheaper hours, not open
        yet: nothing is sent before (a stored answer is still taken)."""
        self.kind = kind
        self.reads_records = reads_records
        """The action has no dependencies: an invalid record fails here, not upstream."""
        self.record_reason = record_reason
        self.record_error = record_error
        self.upstream = upstream
        """(dependency, its result) in dependency order; None: judged elsewhere (a join's
        per-item inputs)."""
        self.stopping = stopping
        self.render_error: str | None = None
        """The view or the request could not be rendered (its message)."""
        self.render_reason = "render_error"
        """``prompt_too_large`` when the rendering was over the action's cap."""
        self.attachment_error: tuple[str, str] | None = None
        """(reason, detail): a file of the request's ``attachments:`` cannot be sent."""
        self.inputs_error: str | None = None
        """A tool's inputs are not JSON (its message)."""
        self.guard = guard
        """None: no guard; True/False: its value; NOT_YET: the view is not built yet."""
        self.guard_text = guard_text
        self.action_failed = action_failed
        self.action_paused = action_paused
        """Why the action's provider is unreachable in this run: nothing more is sent."""
        self.gated = gated
        self.effect = effect
        self.cache = cache
        self.fresh = fresh
        self.batch = batch
        """A batch action on a provider with a batch API."""
        self.items = items
        """Every batch item of the unit (any batch, staged included)."""
        self.own_answer: str | None | NotYet = NOT_YET
        self.carried = carried
        self.fingerprint = fingerprint
        """The request's fingerprint (a tool's: its input hash)."""
        self.stored = stored
        """The answer (a tool's cached result) stored under the fingerprint, or None."""
        self.deadline_passed = deadline_passed
        self.budget_exhausted = budget_exhausted
        self.live = live
        """The batch action switched live in this run (B13): it is sent, not batched."""


def decide(f: UnitFacts) -> Decision:
    """What happens to the unit, by the rules of this module's docstring, in order."""
    if f.record_reason is not None:
        if f.reads_records:
            return Settle("failed", f.record_reason, f.record_error)
        return Settle("skipped", "upstream_failed", "the input record is invalid")
    for dep, r in f.upstream:
        if r is None:
            continue
        if r.status == "failed":
            return Settle("skipped", "upstream_failed", f"{dep} failed: {r.reason}")
        if r.status == "skipped":
            return Settle("skipped", r.reason, f"{dep} was skipped: {r.reason}")
    if f.stopping:
        return _STOPPING
    if f.render_error is not None:
        return Settle("failed", f.render_reason, f.render_error)
    if f.attachment_error is not None:
        return Settle("failed", *f.attachment_error)
    if f.guard is NOT_YET:
        return _NEED_VIEW
    if f.guard is False:
        return Settle("skipped", "guard", f"guard {f.guard_text!r} is false")
    if f.action_failed is not None:
        return Settle("failed", "provider_error", f.action_failed)
    if f.gated:
        return GATE
    if f.kind == "tool":
        return _tool(f)
    if f.batch:
        own = own_item(f.items, f.run_id)
        if own is not None and _own_decides(own, f.run_id, live=f.live):
            return _from_own(f, own)
    fp = f.fingerprint
    if fp is NOT_YET:
        return _NEED_REQUEST
    carried = carried_failure(f.carried, fp)
    if carried is not None:
        return carried
    if f.fresh and not (f.batch and _answer_is_ours(f.items, fp, f.run_id)):
        stored = None  # --fresh reuses nothing stored, except what its own batches read
    elif f.stored is NOT_YET:
        return _NEED_ANSWER
    else:
        stored = f.stored
    if stored is not None:
        origin, attempts = _origin(f.items, fp, f.run_id) if f.batch else ("reused", 0)
        return Settle("answered", None, None, origin, fp, attempts, stored)
    if f.batch and not f.live:
        return _batch(f, fp)
    if f.action_paused is not None:
        return unreachable_skip("never sent", f.action_paused)
    if f.held:
        return _HELD
    return CALL


def _tool(f: UnitFacts) -> Decision:
    if f.inputs_error is not None:
        return Settle("failed", "tool_error", f.inputs_error)
    if f.fingerprint is NOT_YET:
        return _NEED_REQUEST
    if f.effect:
        return EFFECT
    if f.cache and not f.fresh:
        if f.stored is NOT_YET:
            return _NEED_ANSWER
        if f.stored is not None:
            return Settle("answered", None, None, "reused", f.fingerprint, 0, f.stored)
    if f.deadline_passed:
        return deadline_skip("never called")
    return CALL


def first_seen(f: UnitFacts) -> bool:
    """Whether the unit is one the store knows nothing of yet — a valid record, no batch
    item, no failure carried, its request rendered and no answer stored under it. Rule 7
    and 8 read such a unit's fingerprint only to compare it with its items, its carried
    failure and its answer, which it has none of: :func:`decide` answers every such unit
    whose other facts are the same alike, so a pass over thousands of them decides one
    and takes its decision for the others (``BatchUnits.settle_ahead``; a property test
    holds :func:`decide` to it)."""
    return (
        f.record_reason is None
        and not f.upstream
        and not f.items
        and f.carried is None
        and f.fingerprint is not NOT_YET
        and f.stored is None
        and f.own_answer is NOT_YET
    )


# -- batch actions ---------------------------------------------------------------------------


def own_item(items: Sequence[BatchItem], run_id: str) -> BatchItem | None:
    """The latest item of the unit this run staged or sent, if any."""
    own = [i for i in items if i.batch_run == run_id or staged_by(i.batch_key, run_id)]
    return max(own, key=lambda i: i.attempt) if own else None


def _own_decides(item: BatchItem, run_id: str, *, live: bool = False) -> bool:
    """Whether this run's own item settles the unit without rendering: it waits (staged
    here or pending in an open batch) or this run read it. Anything else (a retry, a
    batch resolved not submitted) goes the normal way. For an action that went live
    (B13) only an answer this run read does."""
    if live:
        return item.status == "succeeded" and item.collected_by == run_id
    if item.status == "pending":
        return item.batch_state is None or item.batch_state in OPEN_BATCH_STATES
    return item.status in ("succeeded", "failed") and item.collected_by == run_id


def _from_own(f: UnitFacts, own: BatchItem) -> Decision:
    """Pending while this run's item waits; its failure or its answer once read here."""
    if own.status == "pending":
        return _WAITING
    attempts = sum(1 for i in f.items if i.batch_run == f.run_id)
    if own.status == "failed":
        return Settle("failed", own.reason, own.detail, "call", own.fingerprint, attempts)
    if f.own_answer is NOT_YET:
        return _NEED_OWN
    if f.own_answer is None:
        return Pending("unreadable")  # the next walk asks it through the normal path
    if own.reason == SHARED_ITEM:  # its batch asked an identical request once (S5)
        return Settle("answered", None, None, "reused", own.fingerprint, 0, f.own_answer)
    return read_answer(own.fingerprint, attempts, f.own_answer)


def read_answer(fingerprint: str, attempts: int, output_json: str) -> Settle:
    """The outcome of a unit answered by an item this run read: ``answered``, paid by this
    run (``call``), its attempts the unit's items in this run's batches. ``Store.
    settle_read_items`` writes the same outcome in SQL for a whole batch read."""
    return Settle("answered", None, None, "call", fingerprint, attempts, output_json)


def _matching(items: Sequence[BatchItem], fp: str) -> list[BatchItem]:
    return sorted((i for i in items if i.fingerprint == fp), key=lambda i: i.attempt)


def _answer_is_ours(items: Sequence[BatchItem], fp: str, run_id: str) -> bool:
    return any(i.status == "succeeded" and i.collected_by == run_id for i in _matching(items, fp))


def _origin(items: Sequence[BatchItem], fp: str, run_id: str) -> tuple[Origin, int]:
    """('call', attempts) when this run paid for the batch answer, else ('reused', 0)."""
    mine = [i for i in _matching(items, fp) if i.batch_run == run_id]
    if any(i.status == "succeeded" and i.reason != SHARED_ITEM for i in mine):
        return "call", len(mine)
    return "reused", 0


def _batch(f: UnitFacts, fp: str) -> Decision:
    """A batch action's unit that has no answer: pending where a batch holds its request,
    its failure read here, a stop, or staged."""
    items = _matching(f.items, fp)
    if any(staged_by(i.batch_key, f.run_id) for i in items):
        return _WAITING
    out = [
        i.batch_key for i in items if i.batch_state in OPEN_BATCH_STATES and i.status == "pending"
    ]
    if out:
        return Adopt(tuple(out))
    read_here = [i for i in items if i.collected_by == f.run_id]
    if read_here and read_here[-1].status == "failed":
        last = read_here[-1]
        return Settle("failed", last.reason, last.detail, "call", fp, len(read_here))
    if f.deadline_passed:
        return deadline_skip("never sent")
    if f.budget_exhausted:
        return budget_skip("never sent")
    return _next_stage(read_here)


def _next_stage(read_here: Sequence[BatchItem]) -> Stage:
    """The unit's next item: its next attempt; once an item read here asked for tool calls
    (status ``turn``), a try of the round after the last such item (its first, or one more
    after that round's failed tries)."""
    turns = [n for n, i in enumerate(read_here) if i.status == "turn"]
    if not turns:
        return Stage(len(read_here) + 1)
    turn = read_here[turns[-1]]
    base = ((turn.attempt - 1) // ROUND_SPAN + 1) * ROUND_SPAN
    tries = len(read_here) - turns[-1] - 1
    return Stage(base + tries + 1, continues=True)


# -- the rules other steps share ---------------------------------------------------------------


def carried_failure(carried: CarriedFailure | None, key: str) -> Settle | None:
    """Rule 7 (R1 c): the previous run's failure of the unit, carried when what it asks is
    unchanged — its request's fingerprint, or a gated unit's subject (its gate, before
    any proposal: engine/approvals/gate.py)."""
    if carried is None or carried.fingerprint != key:
        return None
    return Settle("failed", carried.reason, carried.detail, "carried", key)


def deadline_skip(never: str) -> Settle:
    """Skipped ``deadline``: the run's deadline passed first (``never``: what the unit
    never did — ``never sent``, ``never called``, ``never proposed``, ``not sent again
    after 2 attempts``)."""
    return Settle("skipped", "deadline", f"{never}: the run's deadline passed")


def budget_skip(never: str, cap: str | None = None) -> Settle:
    """Skipped ``budget_exhausted``: the budget (``cap``, in words) has no room for the
    request's worst case."""
    budget = "the budget" if cap is None else f"the budget ({cap})"
    return Settle(
        "skipped", "budget_exhausted", f"{never}: {budget} has no room for its worst case"
    )


def unreachable_skip(never: str, why: str) -> Settle:
    """Skipped ``provider_unreachable``: the action is paused in this run (``why``)."""
    return Settle("skipped", "provider_unreachable", f"{never}: {why}")


def before_proposal(*, deadline_passed: bool, stopping: bool) -> Settle | Pending | None:
    """A gated unit with no live proposal that would act (engine/approvals/gate.py): the
    deadline passed -> skipped ``deadline``; the run is stopping -> pending (rule 3);
    None: a proposal is made and the unit waits on it."""
    if deadline_passed:
        return deadline_skip("never proposed")
    if stopping:
        return _STOPPING
    return None


def before_attempt(
    attempt: int,
    fingerprint: str,
    *,
    paused: str | None = None,
    deadline_passed: bool = False,
    no_room: str | None = None,
) -> Settle | None:
    """Rule 9 again before each attempt of a call (engine/walk/calls.py, in its slot): the
    action paused -> skipped ``provider_unreachable``; the deadline passed -> skipped
    ``deadline``; the budget (``no_room``: its cap in words) cannot reserve the request's
    worst case -> skipped ``budget_exhausted``. Each counts the attempts made before it;
    None: send it."""
    never = "never sent" if attempt == 1 else f"not sent again after {attempt - 1} attempts"
    if paused is not None:
        skip = unreachable_skip(never, paused)
    elif deadline_passed:
        skip = deadline_skip(never)
    elif no_room is not None:
        skip = budget_skip(never, no_room)
    else:
        return None
    return skip._replace(fingerprint=fingerprint, attempts=attempt - 1)


def breaker_skip(paused: str, fingerprint: str, attempts: int) -> Settle:
    """A call whose failure paused its action (a burst of identical transport failures,
    engine/walk/calls.py): skipped ``provider_unreachable`` after ``attempts``."""
    return Settle("skipped", "provider_unreachable", paused, "call", fingerprint, attempts)
