"""An answer a unit did not ask in its own call — reused from the store, or read from a batch —
judged by the action's checks, and repaired when a ``repair`` check says so
(docs/workflow-reference.md, Checks).

The answer and each repair make a chain: the unit's request and its answer; when a
``repair`` check fails, the repair request (:func:`agac.engine.checks.repair_request`) and
its answer; and so on, up to the check's ``max_repairs``. Every link is a request with a
fingerprint, and every answer is stored under the request that got it, so the chain is
walked again from the store after a crash, or in a later run, and nothing in it is asked
twice. The same holds for the judges: each verdict is stored under its request.

Where each request goes:

- a batch action's judges and repairs go in its follow-up batch rounds
  (engine/batch/rounds.py: the unit waits on them), unless the judge has ``run_mode:
  online`` or the check ``repair_run_mode: online``;
- otherwise a judge is asked live (engine/judges.py) and a repair is asked live by the
  call path (engine/walk/calls.py), which judges and repairs its answers itself and writes
  the unit's outcome.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agac.engine.batch.rounds import FollowUp, follow_up
from agac.engine.checks import (
    JudgeNotSent,
    Verdict,
    expr_verdict,
    outcome_of,
    repair_request,
    verdicts_json,
)
from agac.engine.decision import Pending, Settle
from agac.engine.judges import grade, judge_request, verdict_of
from agac.prompt.render import RenderError
from agac.providers.base import fingerprint_of

if TYPE_CHECKING:
    from typing import Any

    from agac.config.model import CheckSpec
    from agac.engine.actions import ActionRuntime
    from agac.engine.ports import BatchUnits, UnitContext
    from agac.engine.values import Settled, UnitRecord
    from agac.jsontext import JSON, JSONObject
    from agac.providers.base import Request

__all__ = ["Judging", "LiveRepair", "judge_answer"]

LiveRepair = Callable[["Request", str, str, int], Awaitable["Settled"]]
"""Ask a repair request live (request, its canonical JSON, its fingerprint, the repairs
asked with it): the call path asks, judges, repairs again (from the unit's request, as
:func:`agac.engine.checks.repair_request` does) and writes the unit's outcome."""


@dataclass(frozen=True)
class Judging:
    """What judging one unit's answer needs: the unit, the view its checks see, its request
    (rendered on demand), the batch side when its judges and repairs go in batch rounds,
    and how a repair is asked live."""

    ctx: UnitContext
    rt: ActionRuntime
    rec: UnitRecord
    view: JSONObject
    request: Callable[[], Request]
    batch: BatchUnits | None
    live_repair: LiveRepair


class _Waiting(Exception):
    """A judge or repair waits on a batch round (or the run is stopping)."""


class _Skipped(Exception):
    """A judge or repair was never sent (the budget, the deadline): the unit is skipped."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


async def judge_answer(j: Judging, d: Settle) -> Settle | Settled | None:
    """The outcome of a unit settled ``answered`` by ``d``, once its checks have judged the
    answer (and its repairs): a :class:`Settle` to write, the outcome the call path wrote
    (a live repair), or None while a judge or a repair waits on a batch round."""
    assert d.output_json is not None
    output_json = d.output_json
    repairs = 0
    while True:
        try:
            verdicts = await _verdicts(j, json.loads(output_json), max(d.attempts, 1) + repairs)
        except _Waiting:
            return None
        except _Skipped as exc:
            return d._replace(
                status="skipped", reason=exc.reason, detail=exc.detail, output_json=None
            )
        checked = outcome_of(verdicts, repairs=repairs, can_repair=True)
        if checked.status != "repair":
            kept = checked.verdicts
            attempts = d.attempts + repairs
            if checked.status == "answered":
                return d._replace(
                    detail=checked.detail, checks=kept, output_json=output_json, attempts=attempts
                )
            return d._replace(
                status="failed",
                reason="check_failed",
                detail=checked.detail,
                checks=kept,
                output_json=output_json,
                attempts=attempts,
            )
        assert checked.failed is not None
        got = await _repaired(j, output_json, checked.failed, repairs)
        if got is None:
            return None
        if isinstance(got, Settle):
            return _unrepaired(d, got, checked.failed, verdicts_json(verdicts))
        if not isinstance(got, str):
            return got  # a live repair wrote the unit's outcome
        output_json, repairs = got, repairs + 1


def _unrepaired(d: Settle, got: Settle, v: Verdict, checks: str | None) -> Settle:
    """The unit when the repair of check ``v`` failed (the reason its batch item was read
    with) or was never sent (skipped: the budget, the deadline)."""
    name = v.check.name
    if got.status == "skipped":
        return d._replace(
            status="skipped",
            reason=got.reason,
            detail=f"the repair of check {name!r} was {got.detail}",
            output_json=None,
            checks=checks,
        )
    return d._replace(
        status="failed",
        reason=got.reason,
        detail=f"check {name!r} failed ({v.why}) and its repair failed in the batch: {got.detail}",
        checks=checks,
    )


async def _repaired(
    j: Judging, output_json: str, v: Verdict, repairs: int
) -> str | Settle | Settled | None:
    """The repaired answer (its output as stored), the repair's failure or skip (a
    :class:`Settle`), the unit's outcome written by a live repair, or None while it waits
    on a batch round."""
    ctx, rt = j.ctx, j.rt
    request = repair_request(j.request(), output_json, v)
    text, fp = rt.identify(request)
    round_rt = (
        j.batch.repair_round(rt.name)
        if j.batch is not None and v.check.repair_run_mode != "online"
        else None
    )
    if round_rt is not None and j.batch is not None:
        got = await follow_up(ctx, j.batch, j.rec, FollowUp(round_rt, text, fp))
        if isinstance(got, Pending):
            return None
        if isinstance(got, Settle):
            if got.status == "answered":
                assert got.output_json is not None
                return got.output_json
            return got
    stored = None if ctx.fresh else await ctx.lookups.lookup_answer(fp)
    if stored is not None:
        return stored
    return await j.live_repair(request, text, fp, repairs + 1)


async def _verdicts(j: Judging, answer: JSON, attempt: int) -> tuple[Verdict, ...]:
    """Every check's verdict on ``answer``, in the order written. Raises _Waiting when a
    judge waits on a batch round (every judge still to ask is staged first), _Skipped
    when one was never sent."""
    scope: dict[str, Any] = dict(j.view)
    scope["answer"] = answer
    out: list[Verdict] = []
    waiting = False
    for check in j.rt.action.checks:
        if check.judge is None:
            out.append(expr_verdict(check, scope))
            continue
        v = await _judge(j, check, scope, attempt)
        if v is None:
            waiting = True
            continue
        out.append(v)
    if waiting:
        raise _Waiting()
    return tuple(out)


async def _judge(
    j: Judging, check: CheckSpec, scope: dict[str, Any], attempt: int
) -> Verdict | None:
    """One judge's verdict: from its batch round (None while it waits), else live."""
    ctx, rt = j.ctx, j.rt
    round_rt = j.batch.judge_round(rt.name, check.name) if j.batch is not None else None
    if round_rt is not None and j.batch is not None:
        assert check.judge is not None
        try:
            request = judge_request(check.judge, scope, rt.action.timeout)
        except RenderError as exc:
            return Verdict(check, False, f"the judge's prompt could not be rendered: {exc}")
        text = request.canonical()
        got = await follow_up(ctx, j.batch, j.rec, FollowUp(round_rt, text, fingerprint_of(text)))
        if isinstance(got, Pending):
            return None
        if isinstance(got, Settle):
            if got.status == "answered":
                assert got.output_json is not None
                return verdict_of(check, json.loads(got.output_json))
            if got.status == "failed":
                why = f"the judge could not grade it in its batch ({got.reason}): {got.detail}"
                return Verdict(check, False, why)
            assert got.reason is not None
            raise _Skipped(got.reason, f"the judge of check {check.name!r} was {got.detail}")
    try:
        return await grade(ctx, rt, j.rec, check, scope, attempt)
    except JudgeNotSent as exc:  # the answer stays stored: a later run judges it
        raise _Skipped("budget_exhausted", str(exc)) from exc
