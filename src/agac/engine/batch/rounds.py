"""Follow-up rounds of a batch action: its judges and its repairs, asked in batches of their
own (docs/workflow-reference.md, Checks; docs/guarantees.md, Batches).

An answer read from a batch is judged by the walk (engine/walk/units.py). A ``judge:``
check of a batch action is not asked live then: its request is staged for the next batch
round under a runtime of its own, ``<action>.judge.<check>`` (:func:`judge_action`), at
the judge's model. A ``repair`` that the checks ask for goes the same way, under
``<action>.repair`` (:func:`repair_action`), at the action's own model. A judge with
``run_mode: online`` and a check with ``repair_run_mode: online`` are asked live instead.

A follow-up round is a batch action in every other respect. The one decision
(engine/decision.py) says what becomes of a follow-up request (:func:`follow_up`): its
answer — a verdict, a repaired answer — stored by fingerprint (by this run's round or any
earlier run: never asked twice), a wait on a batch (staged here, or out and adopted), its
failure read here, a skip (the deadline passed, the budget exhausted), or staged. Its
batches are submitted (intents first), recovered after a crash, polled and read by the
same steps as the action's (engine/batch/coordinator.py), each worst case reserved from
the run's budget at the follow-up's model and the batch tier. A round is sent as soon as
the walk after a read has staged it: it does not wait for every file (B4 holds for the
action it follows). Its ledger rows are on the action it follows, a judge's with the
origin ``judge``.

With ``agac worker`` the rounds ride on their action's batch shards: the (action, file)
shard submits, recovers, polls and reads the rounds of that file as well as the action's
batches, and the online shards stage and settle the follow-up requests of their records.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NamedTuple

from agac.engine.decision import NOT_YET, Adopt, Need, Pending, Settle, Stage, UnitFacts, decide
from agac.engine.decision import own_item as own_item_of
from agac.engine.judges import JUDGE_SCHEMA

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agac.config.model import Action, CheckSpec
    from agac.engine.actions import ActionRuntime
    from agac.engine.ports import BatchUnits, UnitContext
    from agac.engine.values import UnitRecord

__all__ = [
    "FollowUp",
    "Rounds",
    "follow_up",
    "follow_up_actions",
    "judge_action",
    "repair_action",
]


def judge_action(action: Action, check: CheckSpec) -> Action:
    """The batch action a ``judge:`` check of ``action`` is asked through."""
    judge = check.judge
    assert judge is not None, check.name
    return replace(
        _follow_up_base(action),
        name=f"{action.name}.judge.{check.name}",
        model=judge.model,
        provider=judge.provider,
        model_name=judge.model_name,
        system=None,
        prompt=None,
        schema=JUDGE_SCHEMA,
        max_tokens=judge.max_tokens,
        temperature=0.0,
        provider_options={},
    )


def repair_action(action: Action) -> Action:
    """The batch action the repairs of ``action``'s answers are asked through."""
    return replace(_follow_up_base(action), name=f"{action.name}.repair")


def _follow_up_base(action: Action) -> Action:
    return replace(
        action,
        dependencies=(action.name,),
        ancestors=(*action.ancestors, action.name),
        when=None,
        approval=None,
        checks=(),
        tools=(),
        attachments=(),
        cache_mode="off",
        context_prefix=None,
        live_after=None,
        run_mode="batch",
    )


def follow_up_actions(
    action: Action,
) -> tuple[list[tuple[tuple[Action, str], str]], Action | None]:
    """The judge rounds of a batch action (((its action, the check), the judge's provider)
    per check whose judge runs in batch) and its repair round (None without a ``repair``
    check that repairs in batch)."""
    judges = [
        ((judge_action(action, c), c.name), c.judge.provider)
        for c in action.checks
        if c.judge is not None and c.judge.run_mode != "online"
    ]
    repairs = any(c.on_fail == "repair" and c.repair_run_mode != "online" for c in action.checks)
    return judges, repair_action(action) if repairs else None


@dataclass(frozen=True)
class Rounds:
    """The follow-up rounds of a run's batch actions, by what they ask for."""

    judges: Mapping[tuple[str, str], ActionRuntime] = field(default_factory=dict)
    """(action, check) -> the round of that check's judge."""
    repairs: Mapping[str, ActionRuntime] = field(default_factory=dict)
    """action -> the round of its repairs."""

    def judge(self, action: str, check: str) -> ActionRuntime | None:
        return self.judges.get((action, check))

    def repair(self, action: str) -> ActionRuntime | None:
        return self.repairs.get(action)

    def runtimes(self, action: str) -> list[ActionRuntime]:
        """The rounds that follow ``action``, judges first."""
        out = [rt for (a, _), rt in self.judges.items() if a == action]
        repair = self.repairs.get(action)
        return [*out, repair] if repair is not None else out


class FollowUp(NamedTuple):
    """A follow-up request of one unit: the round it goes in, its canonical JSON and its
    fingerprint."""

    rt: ActionRuntime
    request_json: str
    fingerprint: str


_WAITING = Pending("batch")


async def follow_up(
    ctx: UnitContext, batch: BatchUnits, rec: UnitRecord, up: FollowUp
) -> Settle | Pending | None:
    """What the one decision makes of the unit's follow-up request ``up``: answered (its
    stored answer as ``output_json``), failed with the reason its item was read with,
    skipped (deadline, budget), or pending — staged for the round's next batch, or
    waiting on one (adopted when it is out). None: the round sends it live in this run
    (its file was below the provider's batch minimum)."""
    if ctx.control.is_live(up.rt.name, rec.key):
        return None
    fp = up.fingerprint
    items = [i for i in batch.items_of(up.rt, rec.key) if i.fingerprint == fp]
    budget = ctx.budget
    f = UnitFacts(
        ctx.run_id,
        stopping=ctx.control.stopping,
        fresh=ctx.fresh,
        batch=True,
        items=items,
        fingerprint=fp,
        stored=NOT_YET,
        deadline_passed=ctx.control.deadline_passed(),
        budget_exhausted=budget is not None and budget.exhausted,
    )
    while True:
        d = decide(f)
        if isinstance(d, Need):
            if d.fact == "answer":
                f.stored = await ctx.lookups.lookup_answer(fp)
            else:
                own = own_item_of(items, ctx.run_id)
                assert own is not None
                f.own_answer = await batch.own_answer(own.fingerprint)
            continue
        if isinstance(d, Stage):
            batch.stage(up.rt, rec, up.request_json, fp, d.attempt)
            return _WAITING
        if isinstance(d, Adopt):
            batch.adopt(d.batches)
            return _WAITING
        assert isinstance(d, (Settle, Pending)), d
        return d
