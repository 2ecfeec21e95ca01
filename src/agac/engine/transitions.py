"""Every bulk change of units' outcomes, as pure functions: from what is known of a set of
units to the outcome each gets, before any row is written.

:func:`engine.decision.decide` is the one decision for a unit a walk reaches. The rest of
a unit's outcomes are written in bulk, by the store, for many units at once; each kind
has its pure function here, and its store writer does what the function says (a property
test per writer holds the two to each other, tests/integration/store/test_i37_store_writers.py):

- **carry unchanged** (R1, a new run of the workflow): :func:`carry` —
  ``Store.carry_run_outcomes``;
- **reopen for retry** (R2, ``agac retry``): :func:`carry_for_retry` — the units it asks
  again get no outcome, the others are carried — ``Store.copy_outcomes``;
- **read a batch**: :func:`read_batch` — each unit an item of the run's own batch
  answered gets the walk's own rule for it (:func:`decision.read_answer`, which
  :func:`decision.decide` applies one unit at a time) — ``Store.settle_read_items``
  (tests/integration/batch/test_one_decision_property.py);
- **end a batch unread** (given up, B7): :func:`abandon` — the units ended runs left
  waiting on it — ``Store.end_batch_unread``;
- **end a run early** (``--new``, a deadline, ``agac cancel``): :func:`close_unit` for
  every unit without an outcome — ``Store.close_units``;
- **fan-out and join**: :func:`join_outcome` — a parent's join from its settled items
  (:func:`judge` splits them; :func:`join_skip`: the run stopped before an item), written
  by the walk (engine/walk/walker.py) like any unit's outcome.

A carried answer has one origin, ``reused``, whichever path carries it; a carried failure
or skip is ``carried``. Where several reasons apply to one unit (a run ending early),
the reason registry's ``precedence`` picks the one that names it (agac/reasons.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from agac.engine.decision import Settle, read_answer
from agac.reasons import HALTING, NOT_CARRIED, REASONS, strongest
from agac.store.values import UnitOutcome

if TYPE_CHECKING:
    from agac.engine.values import Settled
    from agac.jsontext import JSON
    from agac.store.values import Origin, OutcomeRecord, OutcomeStatus

__all__ = [
    "READ",
    "Carry",
    "Closing",
    "JoinInputs",
    "ReadItem",
    "Rewrite",
    "UnitOutcome",
    "abandon",
    "carried_origin",
    "carry",
    "carry_for_retry",
    "close_unit",
    "join_outcome",
    "join_skip",
    "judge",
    "read_batch",
]

Unit = tuple[str, str]
"""(action, unit key)."""

BATCH_OUTSTANDING = "batch_outstanding"
BATCH_CANCELLED = "batch_cancelled"
EFFECT_UNKNOWN = "effect_unknown"
JOIN_ATOMIC = "join_atomic"


class Carry(NamedTuple):
    """A unit's outcome kept by a later run: the row as it was, with this origin and
    attempts (None: the attempts it had)."""

    action: str
    unit_key: str
    origin: Origin
    attempts: int | None


def carried_origin(status: OutcomeStatus) -> Origin:
    """The origin of a carried outcome: ``reused`` for an answer (the one origin of a
    carried answer, on every path), ``carried`` for a failure or a skip."""
    return "reused" if status == "answered" else "carried"


def carries_over(status: str, reason: str | None, uncarried: Collection[str] = ()) -> bool:
    """Whether a new run of the workflow keeps the outcome (R1): not a skip that only
    says the run stopped (``halts``), nor a failure the run's own ending caused
    (``uncarried``: ``Store.failures_not_carried``)."""
    if status == "skipped":
        return reason not in NOT_CARRIED
    return not (status == "failed" and reason in uncarried)


def carry(
    row: OutcomeRecord, *, uncarried: Collection[str] = (), redo: Collection[str] = ()
) -> Carry | None:
    """R1: what a new run keeps of ``row``, an outcome of the previous run (None: the new
    run asks the unit again, as every unit of an action in ``redo``: its definition
    changed). Its attempts start at 0: none were made in the new run."""
    if row.action in redo or not carries_over(row.status, row.reason, uncarried):
        return None
    return Carry(row.action, row.unit_key, carried_origin(row.status), 0)


def carry_for_retry(row: OutcomeRecord, reopened: AbstractSet[Unit]) -> Carry | None:
    """R2: what a retry keeps of ``row``, an outcome of the run it retries: every outcome
    but the units it asks again (``reopened``: the failed units and what they skipped),
    with the attempts they had."""
    if (row.action, row.unit_key) in reopened:
        return None
    return Carry(row.action, row.unit_key, carried_origin(row.status), None)


class ReadItem(NamedTuple):
    """A unit whose item in a batch of its own run was read with an answer."""

    action: str
    unit_key: str
    fingerprint: str
    attempts: int
    """The unit's items in the run's batches."""
    output_json: str


def read_batch(read: Iterable[ReadItem]) -> list[tuple[Unit, Settle]]:
    """A batch read: each unit answered by its item gets the outcome the walk would give
    it (``answered``, paid by this run, its attempts the run's items). The store's writer
    is handed :data:`READ`'s status and origin and writes the same rows in one statement;
    units with an outcome already, and invalid records, stay with the walk."""
    return [
        ((i.action, i.unit_key), read_answer(i.fingerprint, i.attempts, i.output_json))
        for i in read
    ]


READ = read_answer("", 1, "")
"""The status and origin :func:`read_batch` gives every unit, as the SQL writer takes them."""


class Rewrite(NamedTuple):
    """An outcome rewritten in place: (run_id, action, unit_key) gets ``status`` and
    ``reason`` (a tuple, as ``Store.end_batch_unread`` takes it)."""

    run_id: str
    action: str
    unit_key: str
    status: str
    reason: str


def abandon(
    action: str,
    pending: AbstractSet[str],
    waiting: Iterable[tuple[str, str, str]],
    downstream: Mapping[str, AbstractSet[str]],
) -> list[Rewrite]:
    """A batch of ``action`` given up with its ``pending`` items' unit keys: of the units
    ended runs left ``waiting`` on batches ((run_id, action, unit_key), skipped
    ``batch_outstanding``), its own fail ``batch_abandoned``; those of the same records
    downstream of ``action`` in their run (``downstream``: run_id -> actions) are skipped
    ``upstream_failed``. Other units keep waiting."""
    if not pending:
        return []
    records = {k.split("/", 1)[0] for k in pending}
    out = []
    for run_id, a, key in waiting:
        if a == action and key in pending:
            out.append(Rewrite(run_id, a, key, "failed", "batch_abandoned"))
        elif a in downstream.get(run_id, ()) and key.split("/", 1)[0] in records:
            out.append(Rewrite(run_id, a, key, "skipped", "upstream_failed"))
    return out


@dataclass(frozen=True, slots=True)
class Closing:
    """What a run that ends early knows of its units without an outcome."""

    reason: str
    """The stop's reason (``cancelled``, ``deadline``, ``run_ended``): a halting skip."""
    why: str
    """The stop, in words: every unit's detail."""
    ancestors: Mapping[str, AbstractSet[str]]
    """action -> the actions it depends on, directly or not."""
    unknown: AbstractSet[Unit] = frozenset()
    """Units whose effect may or may not have happened (E2)."""
    cancelled: AbstractSet[Unit] = frozenset()
    """Units in a batch cancelled at the provider (B7)."""


def close_unit(
    c: Closing, unit: Unit, waiting: AbstractSet[str], out: Mapping[Unit, str]
) -> UnitOutcome:
    """The outcome of a unit without one when its run ends early: the strongest of the
    reasons that apply (agac/reasons.py ``precedence``) — the stop's; ``batch_outstanding``
    when it or an action it depends on waits on a batch still out (``waiting``: the
    record's actions that do; ``out``: unit -> the batch, named in the detail);
    ``batch_cancelled``; ``effect_unknown``."""
    action = unit[0]
    reasons = [c.reason]
    detail = {c.reason: c.why, BATCH_OUTSTANDING: c.why}
    if unit in out:
        reasons.append(BATCH_OUTSTANDING)
        detail[BATCH_OUTSTANDING] = f"{c.why}; {out[unit]}"
    elif action in waiting or c.ancestors[action] & waiting:
        reasons.append(BATCH_OUTSTANDING)
    if unit in c.cancelled:
        reasons.append(BATCH_CANCELLED)
    if unit in c.unknown:
        reasons.append(EFFECT_UNKNOWN)
    code = strongest(reasons)
    return UnitOutcome(action, unit[1], REASONS[code].bucket, code, detail.get(code, c.why))


class JoinInputs(NamedTuple):
    """What a join is given: its parent's items fulfilled, rejected and skipped by a guard."""

    fulfilled: list[JSON]
    rejected: list[JSON]
    skipped: list[JSON]


def join_outcome(
    items: list[tuple[str, dict[str, Settled]]], inputs: list[str], *, atomic: bool, tool: bool
) -> Settle | JoinInputs:
    """The outcome of a fan-out parent's join from its settled items, or the inputs it is
    called (a tool) or answered (a ``join``) with: skipped with a halting item's reason
    when the run stopped before asking one (:func:`join_skip`); with ``failure: atomic``
    and a rejected item, skipped ``join_atomic`` — a tool join is still called, with
    nothing fulfilled."""
    fulfilled, rejected, skipped, halt = judge(items, inputs)
    if halt is not None:
        return Settle("skipped", *halt)
    if rejected and atomic:
        if not tool:
            keys = ", ".join(str(r["key"]) for r in rejected if isinstance(r, dict))
            return Settle(
                "skipped",
                JOIN_ATOMIC,
                f"{len(rejected)} of {len(items)} items failed ({keys}); failure_policy atomic",
            )
        fulfilled = []
    return JoinInputs(fulfilled, rejected, skipped)


def judge(
    items: list[tuple[str, dict[str, Settled]]], inputs: list[str]
) -> tuple[list[JSON], list[JSON], list[JSON], tuple[str, str] | None]:
    """Split a fan-out parent's settled items, in request order, into fulfilled (key,
    output), rejected (key, reason, action) and skipped by a guard, for its join; or the
    join's skip when an item was never asked because the run stopped (:func:`join_skip`)."""
    fulfilled: list[JSON] = []
    rejected: list[JSON] = []
    skipped: list[JSON] = []
    for index, (key, res) in enumerate(items):
        states = [res[a] for a in inputs if a in res]
        if states and all(s.status == "answered" for s in states):
            output = (
                states[0].output
                if len(inputs) == 1
                else {a: res[a].output for a in inputs if a in res}
            )
            fulfilled.append({"key": key, "index": index, "output": output})
            continue
        failure = next(((a, s) for a, s in res.items() if s.status == "failed"), None)
        if failure is not None:
            rejected.append(
                {"key": key, "index": index, "action": failure[0], "reason": failure[1].reason}
            )
            continue
        reason = next((s.reason for s in states if s.status == "skipped"), None) or "guard"
        halt = join_skip(key, reason)
        if halt is not None:  # the run stopped: the parent is skipped, not joined
            return fulfilled, rejected, skipped, halt
        if reason == "guard":
            skipped.append({"key": key, "index": index, "reason": reason})
        else:
            # A skip that stands for a failure inside the item (an inner atomic join).
            rejected.append(
                {
                    "key": key,
                    "index": index,
                    "action": next(
                        (a for a in inputs if a in res and res[a].status == "skipped"), None
                    ),
                    "reason": reason,
                }
            )
    return fulfilled, rejected, skipped, None


def join_skip(item: str, reason: str) -> tuple[str, str] | None:
    """(reason, detail) of a join skipped because item ``item`` was skipped ``reason``
    that halts (the run stopped before asking it); None for any other skip."""
    if reason in HALTING:
        return reason, f"item {item} was not asked: {reason}"
    return None
