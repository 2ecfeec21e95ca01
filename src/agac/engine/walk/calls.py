"""One online llm call with its retries (DESIGN §5): under the action's concurrency slot
and rate limiter, with the run's deadline and budget checked before each attempt, the
error taxonomy applied (wait: the hint, no attempt spent; retryable: backoff with jitter;
fatal: ``provider_error``; unsupported: the action fails as a whole), and an answer the
schema or the token limit rejects asked again with the error fed back.

The outcome is committed while the slot is held: a unit that paid keeps its slot until
its answer is durable (S1), so a crash loses at most the calls in flight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agac.engine.limits.rates import backoff_delay, estimate_tokens
from agac.engine.requests import Fail, accept_response, reprompt, response_dict
from agac.engine.values import Stopped
from agac.errors import FatalError, ProviderError, UnsupportedError, WaitError
from agac.jsontext import dumps

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.ports import UnitContext
    from agac.engine.values import Settled, UnitRecord
    from agac.providers.base import Request, Response
    from agac.store.values import OutcomeStatus

__all__ = ["backoff", "call_with_retries"]

_NO_ANSWER = object()


async def call_with_retries(ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord,
                            request: Request, fp: str, request_json: str) -> Settled:
    """Call until answered or out of attempts; commit the outcome while holding the slot.
    Raises Stopped when the run stops before the first attempt."""
    spec = rt.action.retry
    attempt = 0
    current = request
    clock = ctx.control.clock
    while True:
        attempt += 1
        delay = 0.0
        async with rt.slots:
            if ctx.control.stopping and attempt == 1:
                raise Stopped()
            refused = await _may_send(ctx, rt, rec, current, fp, attempt)
            if isinstance(refused, tuple):
                return refused[0]
            held = refused
            started = clock.monotonic()
            try:
                response = await _complete(ctx, rt, current, held)
            except WaitError as exc:
                await ctx.out.record_call(rt, rec, attempt, current, None, exc, started, fp)
                attempt -= 1
                delay = exc.retry_after or 1.0
                await ctx.out.event("waiting", rt.name, rec.key, reason="provider_limit",
                                    seconds=delay)
            except ProviderError as exc:
                await ctx.out.record_call(rt, rec, attempt, current, None, exc, started, fp)
                final = _failed(rt, exc, attempt, spec.max_attempts)
                if final is not None:
                    return await _final(ctx, rt, rec, "failed", final[0], final[1], None, fp,
                                        attempt)
                delay = backoff(spec, attempt)
            else:
                try:
                    output = accept_response(rt, response)
                except Fail as fail:
                    await ctx.out.record_call(rt, rec, attempt, current, response, fail, started, fp)
                    if not fail.retry or attempt >= spec.max_attempts:
                        return await _final(ctx, rt, rec, "failed", fail.reason, fail.detail,
                                            None, fp, attempt)
                    # Ask again with the error fed back, after the same backoff as any
                    # retryable failure (DESIGN §5).
                    current = reprompt(request, response, fail)
                    delay = backoff(spec, attempt)
                    output = _NO_ANSWER
                if output is not _NO_ANSWER:
                    return await _answered(ctx, rt, rec, request, request_json, response, output,
                                           current, attempt, started, fp)
        if ctx.control.stopping:
            raise Stopped()
        await clock.sleep(delay)


async def _may_send(ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, current: Request,
                    fp: str, attempt: int) -> Any:
    """Before an attempt, in its slot: the deadline (R4), the budget's reservation (R5)
    and the rate window. The reservation to settle after the call (or None); a 1-tuple
    with the unit's outcome when it must not be sent."""
    sent = "never sent" if attempt == 1 else f"not sent again after {attempt - 1} attempts"
    if ctx.control.deadline_passed():
        return (await _final(ctx, rt, rec, "skipped", "deadline",
                             f"{sent}: the run's deadline passed", None, fp, attempt - 1),)
    held = None
    budget = ctx.budget
    if budget is not None:
        await budget.refresh()  # worker mode: what other workers spent counts
        held = budget.for_request(rt.action, current)
        if not budget.reserve(held):
            return (await _final(ctx, rt, rec, "skipped", "budget_exhausted",
                                 f"{sent}: the budget ({budget.cap_text()}) has no room for its "
                                 "worst case", None, fp, attempt - 1),)
    if rt.limiter.active:
        est = estimate_tokens(sum(len(m.content) for m in current.messages)) + current.max_tokens
        waited = await rt.limiter.acquire(est)
        if waited > 1:
            await ctx.out.event("waiting", rt.name, rec.key, reason="rate_budget",
                                seconds=round(waited, 3))
    return held


def _failed(rt: ActionRuntime, exc: ProviderError, attempt: int, max_attempts: int
            ) -> tuple[str, str] | None:
    """(reason, detail) when a provider error ends the unit; None to try again."""
    if isinstance(exc, UnsupportedError):
        rt.stopped = f"{rt.action.name} cannot run: {exc}"
        return "provider_error", str(exc)
    if isinstance(exc, FatalError):
        return exc.reason or "provider_error", str(exc)
    if attempt >= max_attempts:
        return "provider_error", f"after {attempt} attempts: {exc}"
    return None


async def _complete(ctx: UnitContext, rt: ActionRuntime, request: Request, held: Any) -> Response:
    """One call; with a budget, its reservation is settled to the call's actual usage
    (a call that raised has no usage: it is settled at 0, as the ledger records it)."""
    budget = ctx.budget
    if held is None or budget is None:
        return await rt.provider.complete(request)  # type: ignore[no-any-return]
    try:
        response = await rt.provider.complete(request)
    except BaseException:
        budget.settle(held, 0.0, 0)
        raise
    budget.settle_usage(held, rt.action.model or "", response.usage)
    return response  # type: ignore[no-any-return]


async def _answered(
    ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, request: Request, request_json: str,
    response: Response, output: Any, current: Request, attempt: int, started: float, fp: str,
) -> Settled:
    """Commit an accepted answer: stored under the ORIGINAL request's fingerprint (a reprompt
    is how we got it, not what was asked), with its usage row."""
    usage_row = ctx.out.usage_row(rt, rec, attempt, current, response, None, started, fp)
    output_json = dumps(output)
    answer = {
        "fingerprint": fp, "provider": request.provider, "model": request.model,
        "request": request_json, "response": dumps(response_dict(response)),
        "output": output_json, "created_at": ctx.control.clock.time(),
    }
    return await _final(ctx, rt, rec, "answered", None, None, output, fp, attempt,
                        answers=[answer], usage=[usage_row], output_json=output_json)


async def _final(
    ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, status: OutcomeStatus,
    reason: str | None, detail: str | None, output: Any, fp: str, attempts: int, *,
    answers: list[dict[str, Any]] | None = None, usage: list[dict[str, Any]] | None = None,
    output_json: str | None = None,
) -> Settled:
    return await ctx.out.settle(rt, rec, status, reason, detail, output=output, origin="call",
                                fingerprint=fp, attempts=attempts, answers=answers, usage=usage,
                                output_json=output_json)


def backoff(spec: Any, attempt: int) -> float:
    """The wait after failed attempt ``attempt`` under the action's retry spec."""
    return backoff_delay(
        attempt, initial=spec.backoff_initial, maximum=spec.backoff_max,
        multiplier=spec.backoff_multiplier, jitter=spec.jitter,
    )
