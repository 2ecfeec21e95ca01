"""One online llm call with its retries (docs/providers.md): under the action's concurrency slot
and rate limiter, with the run's deadline and budget checked before each attempt, the
error taxonomy applied (wait: the hint, no attempt spent; retryable: backoff with jitter;
fatal: ``provider_error``; unsupported: the action fails as a whole), and an answer the
schema or the token limit rejects asked again with the error fed back.

The outcome is committed while the slot is held: a unit that paid keeps its slot until
its answer is durable (S1), so a crash loses at most the calls in flight. The slot goes
back in the store's writer, right after the commit that makes the answer durable and
before the units of that group are woken: the slots of a group commit pass on in the
order its units answered, and the units waiting for them send before the group's own
units do their bookkeeping.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple, Protocol

from agac.engine.checks import (
    CheckedOutcome,
    JudgeNotSent,
    kept_before_judging,
    outcome_of,
    repair_feedback,
    repair_request,
)
from agac.engine.crashpoints import maybe_crash
from agac.engine.decision import before_attempt, breaker_skip
from agac.engine.limits.rates import Slots, backoff_delay, estimate_tokens
from agac.engine.outcomes.dispatch import Dispatch
from agac.engine.requests import Fail, accept_response, reprompt, response_dict
from agac.engine.values import Settled, Stopped
from agac.engine.workers.rates import WorkerSlots
from agac.errors import FatalError, ProviderError, TransportError, UnsupportedError, WaitError
from agac.jsontext import JSON, dumps
from agac.media import AttachmentError
from agac.providers.base import Request
from agac.store.rows import AnswerRow

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from contextlib import AbstractAsyncContextManager

    from agac.config.model import RetrySpec
    from agac.engine.actions import ActionRuntime
    from agac.engine.checks import Verdict
    from agac.engine.limits.budget import Reservation
    from agac.engine.ports import UnitContext
    from agac.engine.values import UnitRecord
    from agac.providers.base import Response
    from agac.store.rows import UsageRow
    from agac.store.values import OutcomeStatus

__all__ = [
    "BREAKER_MIN",
    "Checker",
    "ToolTurns",
    "backoff",
    "breaker_threshold",
    "call_with_retries",
]

Checker = Callable[[JSON, int], "Awaitable[tuple[Verdict, ...]]"]
"""The verdicts of an action's checks on one answer of the given attempt, for the unit
being called (a judge's call is ledgered on that attempt)."""


class ToolTurns(Protocol):
    """A unit's tool loop (engine/walk/toolloop.py), as a call sees it: a turn that calls
    tools is handed over with its ledger row; the loop stores it, runs the calls and gives
    the request of the next turn, or the unit's outcome when a bound ends it."""

    async def answer_calls(
        self, current: Request, response: Response, usage: UsageRow
    ) -> Request | Settled: ...

    def cited(self, response: Response) -> Response:
        """The loop's final answer with the sources of the searches agac ran in it (a
        loop's answer is asked with its conversation, and cites what it searched)."""


async def call_with_retries(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    request: Request,
    fp: str,
    request_json: str,
    checker: Checker | None = None,
    loop: ToolTurns | None = None,
    start: Request | None = None,
    repairs: int = 0,
    base: Request | None = None,
) -> Settled:
    """Call until answered or out of attempts; commit the outcome while holding the slot.
    Raises Stopped when the run stops before an attempt (the unit stays pending).
    ``checker`` gives the verdicts of the action's checks on an accepted answer: a failed
    ``repair`` check asks again with its message (engine/checks.py).

    S1: before it waits for a slot, the unit is expected by the dispatch marks; holding
    the slot, it is listed in a durable mark before the call goes out; once the slot is
    given back (the outcome committed, or nothing sent) it is released.

    With a tool ``loop``, a turn that calls tools goes to it and the next turn is sent in
    the same attempt (a turn is not an attempt); ``start`` is the request of the first turn
    to send (a loop resumed with stored turns), and a rejected answer is asked again with
    the conversation so far.

    ``request`` may itself be a repair (engine/walk/judging.py: of an answer not asked
    here): ``repairs`` were asked before it, and ``base`` is the unit's own request, which
    every repair starts from (:func:`agac.engine.checks.repair_request`)."""
    attempt = 0
    asking: Request | None = None
    """The repair request the answers now answer (None: ``request``)."""
    current = start if start is not None else request
    marks = ctx.marks
    pool = _pool(rt.slots)
    fallback = _FlexFallback.of(ctx, rt, request)
    call = Dispatch(pool, marks, rt.name, rt.action.max_concurrency, rec.key, rec.seq, fp, current)
    while True:
        attempt += 1
        if fallback is not None:
            current = await fallback.tiered(current, rec)
        call.request = current
        if marks is not None:
            marks.expect(call)
        if rt.encoder is not None and call.body_for is not current:
            call.body, call.body_for = rt.encoder.encode_call(current), current
        try:
            await pool.acquire()
            call.held = True
            if ctx.control.stopping:
                raise Stopped()  # never sent, or not sent again: pending for the next run
            checks = _Checks(checker, repairs, loop, base or request, asking)
            done = await _attempt(
                ctx, rt, rec, request, request_json, current, fp, attempt, call, checks
            )
        finally:
            call.give_back()  # given back already when the answer's commit did it
        if not isinstance(done, _Again):
            return done
        repairs += done.repair
        current = done.request
        if done.repair:
            asking = done.request
        attempt -= 0 if done.spent else 1  # a provider's "wait" spends no attempt
        delay = done.delay if fallback is None else fallback.capped(done.delay)
        if await ctx.control.sleep(delay):
            raise Stopped()


class _FlexFallback:
    """``flex_fallback_after`` of one unit: from its first flex call on, once the action's
    fallback time has passed, its next attempts (a retry, a reprompt, the call after a
    capacity wait) go at the standard tier. A wait is cut short at that moment. The time
    is the run's clock (an injected one in tests); a unit picked up again by a later
    invocation starts its flex time anew."""

    __slots__ = ("ctx", "due", "fell", "rt")

    def __init__(self, ctx: UnitContext, rt: ActionRuntime, due: float) -> None:
        self.ctx, self.rt, self.due = ctx, rt, due
        self.fell = False

    @classmethod
    def of(cls, ctx: UnitContext, rt: ActionRuntime, request: Request) -> _FlexFallback | None:
        after = rt.action.flex_fallback_after
        if request.tier != "flex" or after is None:
            return None
        return cls(ctx, rt, ctx.control.clock.monotonic() + after)

    async def tiered(self, request: Request, rec: UnitRecord) -> Request:
        """``request`` at the tier its next attempt goes at; the first move to the standard
        tier is an event (``flex_fallback``)."""
        if not self.fell and self.ctx.control.clock.monotonic() < self.due:
            return request
        if not self.fell:
            self.fell = True
            await self.ctx.out.event(
                "flex_fallback",
                self.rt.name,
                rec.key,
                after=self.rt.action.flex_fallback_after,
            )
        return replace(request, tier=None) if request.tier == "flex" else request

    def capped(self, delay: float) -> float:
        """A wait before the next attempt, ended at the fallback moment."""
        if self.fell:
            return delay
        return max(0.0, min(delay, self.due - self.ctx.control.clock.monotonic()))


def _pool(slots: AbstractAsyncContextManager[None]) -> Slots | WorkerSlots:
    """The action's slots as a pool whose slot goes back synchronously, as the store's
    writer gives it back in its commit."""
    assert isinstance(slots, (Slots, WorkerSlots)), type(slots)
    return slots


class _Again(NamedTuple):
    """An attempt that did not settle the unit: wait ``delay``, then send ``request``;
    ``spent``: the attempt counts against ``max_attempts``; ``repair``: the answer failed
    a ``repair`` check and ``request`` asks for its repair."""

    delay: float
    request: Request
    spent: bool
    repair: bool = False


class _Checks(NamedTuple):
    """What one attempt applies to an answer: the verdicts of the action's checks, the
    repairs already asked for this unit, the unit's tool loop (None: no tools), the
    request its repairs start from, and the repair request the answer answers (None:
    the unit's)."""

    checker: Checker | None
    repairs: int
    loop: ToolTurns | None = None
    base: Request | None = None
    asking: Request | None = None


async def _attempt(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    request: Request,
    request_json: str,
    current: Request,
    fp: str,
    attempt: int,
    call: Dispatch,
    checks: _Checks,
) -> Settled | _Again:
    """One attempt, in the unit's slot: its outcome, or (the wait before the next attempt,
    the request to send then, whether this attempt counts)."""
    spec = rt.action.retry
    held = await _may_send(ctx, rt, rec, current, fp, attempt)
    if isinstance(held, Settled):
        return held
    if ctx.marks is not None:
        await ctx.marks.send(call)  # S1: listed before it is sent
    started = ctx.control.clock.monotonic()
    try:
        response = await _complete(ctx, rt, current, held, call)
    except AttachmentError as exc:  # read again at send time, a file changed: nothing sent
        why = exc.reason or "attachment_changed"
        return await _final(ctx, rt, rec, "failed", why, str(exc), None, fp, attempt - 1)
    except WaitError as exc:
        await ctx.out.record_call(rt, rec, attempt, current, None, exc, started, fp)
        delay = exc.retry_after or 1.0
        await ctx.out.event("waiting", rt.name, rec.key, reason="provider_limit", seconds=delay)
        return _Again(delay, current, False)
    except ProviderError as exc:
        return await _provider_failed(ctx, rt, rec, current, exc, started, fp, attempt)
    ctx.control.transport_ok(rt.name)
    loop = checks.loop
    if loop is not None and response.stop_reason == "tool_use":
        row = ctx.out.usage_row(rt, rec, attempt, current, response, None, started, fp)
        turn = await loop.answer_calls(current, response, row)
        return turn if not isinstance(turn, Request) else _Again(0.0, turn, False)
    asked, response = (current, loop.cited(response)) if loop is not None else (request, response)
    try:
        output = accept_response(rt, response)
    except Fail as fail:
        await ctx.out.record_call(rt, rec, attempt, current, response, fail, started, fp)
        if not fail.retry or attempt >= spec.max_attempts:
            return await _final(ctx, rt, rec, "failed", fail.reason, fail.detail, None, fp, attempt)
        # Ask again with the error fed back, after the same backoff as any retryable
        # failure (docs/providers.md).
        return _Again(backoff(spec, attempt), reprompt(asked, response, fail), True)
    got = _Answer(request, request_json, response, output, current, _ANSWERED, fp)
    if checks.checker is None:  # no checks: the answer as it came
        return await _answered(ctx, rt, rec, got, attempt, started, fp, call)
    kept = kept_before_judging(rt.action.checks)
    if kept:
        got = await _keep(ctx, rt, rec, got, checks, attempt, started, fp)
    checked = await _checked(checks, output, attempt)
    if checked.status == "skipped":
        return await _answered(
            ctx, rt, rec, got._replace(checked=checked), attempt, started, fp, call, kept
        )
    if checked.status == "repair":
        assert checked.failed is not None
        repair = Fail(
            "check_failed",
            f"check {checked.failed.check.name!r} failed: {checked.failed.why}",
            retry=True,
            feedback=repair_feedback(checked.failed),
        )
        if not kept:  # a kept answer is ledgered already, its verdicts with it
            await ctx.out.record_call(rt, rec, attempt, current, response, repair, started, fp)
        nxt = (
            reprompt(asked, response, repair)  # a tool loop keeps its conversation
            if loop is not None
            else repair_request(checks.base or request, dumps(output), checked.failed)
        )
        return _Again(0.0, nxt, True, repair=True)
    return await _answered(
        ctx, rt, rec, got._replace(checked=checked), attempt, started, fp, call, kept
    )


async def _provider_failed(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    current: Request,
    exc: ProviderError,
    started: float,
    fp: str,
    attempt: int,
) -> Settled | _Again:
    """An attempt the provider answered with an error, recorded: the breaker's pause, the
    unit's failure, or the next attempt after the backoff."""
    await ctx.out.record_call(rt, rec, attempt, current, None, exc, started, fp)
    paused = _unreachable(ctx, rt, exc)
    if paused is not None:
        return await ctx.out.decided(rt, rec, breaker_skip(paused, fp, attempt))
    spec = rt.action.retry
    final = _failed(ctx, rt, exc, attempt, spec.max_attempts)
    if final is not None:
        return await _final(ctx, rt, rec, "failed", final[0], final[1], None, fp, attempt)
    return _Again(backoff(spec, attempt), current, True)


async def _checked(checks: _Checks, output: JSON, attempt: int) -> CheckedOutcome:
    """What the action's checks make of an accepted answer (``skipped`` when a judge
    could not be sent for the budget)."""
    try:
        verdicts = await checks.checker(output, attempt) if checks.checker is not None else ()
    except JudgeNotSent as exc:
        return CheckedOutcome("skipped", str(exc))
    return outcome_of(verdicts, repairs=checks.repairs, can_repair=True)


async def _may_send(
    ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, current: Request, fp: str, attempt: int
) -> Reservation | Settled | None:
    """Before an attempt, in its slot: the deadline (R4), the budget's reservation (R5)
    and the rate window. The reservation to settle after the call (None without a
    budget), or the unit's outcome when it must not be sent. Raises Stopped when the run
    stops while waiting for room in the rate window (nothing was sent)."""
    skip = before_attempt(
        attempt,
        fp,
        paused=ctx.control.action_paused(rt.name),
        deadline_passed=ctx.control.deadline_passed(),
    )
    if skip is not None:
        return await ctx.out.decided(rt, rec, skip)
    held = None
    budget = ctx.budget
    if budget is not None:
        await budget.refresh()  # worker mode: what other workers spent counts
        held = budget.for_request(rt.action, current)
        if not budget.reserve(held):
            full = before_attempt(attempt, fp, no_room=budget.cap_text())
            assert full is not None
            return await ctx.out.decided(rt, rec, full)
    if rt.limiter.active:
        est = estimate_tokens(sum(len(m.content) for m in current.messages)) + current.max_tokens
        waited = await rt.limiter.acquire(est, stop=ctx.control.stop_signal)
        if waited is None:  # stopped while waiting for room: nothing was sent
            if held is not None and budget is not None:
                budget.settle(held, 0.0, 0)
            raise Stopped()
        if waited > 1:
            await ctx.out.event(
                "waiting", rt.name, rec.key, reason="rate_budget", seconds=round(waited, 3)
            )
    return held


BREAKER_MIN = 10
"""Identical transport failures in a row that pause an action, at least; an action with
many calls in flight needs two rounds of them (``2 × max_concurrency``): a blip that
fails every call in flight at once is retried, a provider that stays down is not."""


def breaker_threshold(max_concurrency: int) -> int:
    return max(BREAKER_MIN, 2 * max_concurrency)


def _unreachable(ctx: UnitContext, rt: ActionRuntime, exc: ProviderError) -> str | None:
    """Why the action is paused when this error is the one that pauses it (or it is
    paused already); None while its provider may still be reachable."""
    if not isinstance(exc, TransportError):
        ctx.control.transport_ok(rt.name)  # the provider answered, with an error
        return None
    threshold = breaker_threshold(rt.action.max_concurrency)
    return ctx.control.transport_failed(rt.name, str(exc), threshold)


def _failed(
    ctx: UnitContext, rt: ActionRuntime, exc: ProviderError, attempt: int, max_attempts: int
) -> tuple[str, str] | None:
    """(reason, detail) when a provider error ends the unit; None to try again. An
    ``unsupported`` error fails the action as a whole (its other units are not sent)."""
    if isinstance(exc, UnsupportedError):
        ctx.control.fail_action(rt.name, f"{rt.action.name} cannot run: {exc}")
        return "provider_error", str(exc)
    if isinstance(exc, FatalError):
        return exc.reason or "provider_error", str(exc)
    if attempt >= max_attempts:
        return "provider_error", f"after {attempt} attempts: {exc}"
    return None


def _send(rt: ActionRuntime, request: Request, call: Dispatch) -> Awaitable[Response]:
    """The call going out: with its wire body encoded while it waited for the slot, when
    the adapter encodes ahead and the body is ``request``'s."""
    body, encoder = call.body, rt.encoder
    if body is not None and encoder is not None and call.body_for is request:
        return encoder.complete_encoded(request, body)
    provider = rt.provider
    assert provider is not None, rt.name
    return provider.complete(request)


async def _complete(
    ctx: UnitContext, rt: ActionRuntime, request: Request, held: Reservation | None, call: Dispatch
) -> Response:
    """One call; with a budget, its reservation is settled to the call's actual usage
    (a call that raised has no usage: it is settled at 0, as the ledger records it)."""
    budget = ctx.budget
    if held is None or budget is None:
        return await _send(rt, request, call)
    try:
        response = await _send(rt, request, call)
    except BaseException:
        budget.settle(held, 0.0, 0)
        raise
    budget.settle_usage(held, rt.action.model or "", response.total_usage, request.ledger_tier)
    return response


class _Answer(NamedTuple):
    """An accepted answer: the request it is stored under (the unit's; a repair's when it
    is kept before judging), that request's canonical JSON, the response, its output, the
    request that got it (a reprompt or a repair), what the action's checks made of it,
    and the fingerprint it is stored under."""

    request: Request
    request_json: str
    response: Response
    output: JSON
    current: Request
    checked: CheckedOutcome
    key: str


def _answered(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    got: _Answer,
    attempt: int,
    started: float,
    fp: str,
    call: Dispatch,
    kept: bool = False,
) -> Coroutine[object, None, Settled]:
    """Commit an accepted answer: stored under the ORIGINAL request's fingerprint (a reprompt
    or a repair is how we got it, not what was asked), with its usage row; the slot goes
    back at that commit. An answer that failed a check is stored all the same (it was paid
    for); the unit then fails ``check_failed``, or is answered with its flags as detail;
    a judge the budget had no room for skips it ``budget_exhausted``. ``kept``: the answer
    and its usage are stored already (:func:`_keep`), only the outcome is written."""
    status, reason = _STATUS[got.checked.status]
    text = dumps(got.output)  # encoded once: the stored answer's and the outcome's
    answers, usage = (
        ((), ()) if kept else _answer_rows(ctx, rt, rec, got, attempt, started, fp, text)
    )
    output = None if status == "skipped" else got.output  # a skipped unit has no answer
    return _final(
        ctx,
        rt,
        rec,
        status,
        reason,
        got.checked.detail,
        output,
        fp,
        attempt,
        answers=answers,
        usage=usage,
        output_json=None if output is None else text,
        on_durable=call.give_back,
        checks=got.checked.verdicts,
    )


_ANSWERED = CheckedOutcome("answered")
_STATUS: dict[str, tuple[OutcomeStatus, str | None]] = {
    "answered": ("answered", None),
    "failed": ("failed", "check_failed"),
    "skipped": ("skipped", "budget_exhausted"),
}


def _answer_rows(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    got: _Answer,
    attempt: int,
    started: float,
    fp: str,
    output_json: str | None = None,
) -> tuple[tuple[AnswerRow], list[UsageRow]]:
    """The answer as stored by fingerprint, and its usage rows (its legs first);
    ``output_json``: the answer's output encoded already."""
    request, response, current = got.request, got.response, got.current
    usage_row = ctx.out.usage_row(rt, rec, attempt, current, response, None, started, fp)
    legs = (
        ctx.out.leg_rows(rt, ctx.run_id, rec.key, attempt, fp, response, current.ledger_tier)
        if response.legs
        else []
    )
    answer = AnswerRow(
        got.key,
        request.provider,
        request.model,
        got.request_json,
        dumps(response_dict(response)),
        dumps(got.output) if output_json is None else output_json,
        ctx.control.clock.time(),
    )
    return (answer,), [*legs, usage_row]


async def _keep(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    got: _Answer,
    checks: _Checks,
    attempt: int,
    started: float,
    fp: str,
) -> _Answer:
    """The answer and its usage made durable before its judges are asked: a crash in
    between finds it stored (reused by fingerprint, judged then), so it is never asked
    twice and the judges' stored verdicts are read, not asked again. A repair's answer is
    kept under the repair's request; the answer as kept is returned."""
    if checks.asking is not None:
        text, key = rt.identify(checks.asking, rec.key)
        got = got._replace(request=checks.asking, request_json=text, key=key)
    answers, usage = _answer_rows(ctx, rt, rec, got, attempt, started, fp)
    await ctx.out.keep_answer(rt, answers, usage)
    maybe_crash("answer_kept")  # the answer is durable, its judges not yet asked
    return got


def _final(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    status: OutcomeStatus,
    reason: str | None,
    detail: str | None,
    output: JSON,
    fp: str,
    attempts: int,
    *,
    answers: Sequence[AnswerRow] = (),
    usage: Sequence[UsageRow] = (),
    output_json: str | None = None,
    on_durable: Callable[[], None] | None = None,
    checks: str | None = None,
) -> Coroutine[object, None, Settled]:
    """The unit's outcome written (the writer's own coroutine: a unit's every suspension
    resumes through each frame above it, so the call path adds none of its own)."""
    return ctx.out.settle(
        rt,
        rec,
        status,
        reason,
        detail,
        output=output,
        origin="call",
        fingerprint=fp,
        attempts=attempts,
        answers=answers,
        usage=usage,
        output_json=output_json,
        on_durable=on_durable,
        checks=checks,
    )


def backoff(spec: RetrySpec, attempt: int) -> float:
    """The wait after failed attempt ``attempt`` under the action's retry spec."""
    return backoff_delay(
        attempt,
        initial=spec.backoff_initial,
        maximum=spec.backoff_max,
        multiplier=spec.backoff_multiplier,
        jitter=spec.jitter,
    )
