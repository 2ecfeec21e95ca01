"""A ``judge:`` check: a model that grades one answer (docs/workflow-reference.md, Checks).

The judge's request is its ``system`` (else :data:`JUDGE_SYSTEM`) and its ``prompt``
rendered with the unit's view plus ``answer``, asking for the built-in verdict schema
(:data:`JUDGE_SCHEMA`: ``pass`` and ``reason``). It is a request like any other: its
canonical JSON is fingerprinted, and a verdict already stored under that fingerprint is
read, not asked again — so a run that stopped between an answer and its judge, or a
second run over the same answers, pays for no judge twice.

Each judge call is committed to the ledger as it returns, with the origin ``judge``, on
the unit it grades and priced at the judge's model; its answer is stored by fingerprint
with it. A judge that cannot answer (a provider error after the action's retries, or no
verdict of the schema's shape) fails the check, saying why: a check never passes by
accident. Judges are called live, in the judged unit's slot, also for an answer read from
a batch or reused.

A judge's call reserves its worst case from the run's budget like any call (R5), priced
at the judge's model; when the budget has no room for it, the judge is not sent and the
unit it grades is skipped ``budget_exhausted``, naming the check (:class:`JudgeNotSent`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agac.engine.checks import JUDGE_ORIGIN, JudgeNotSent, Verdict
from agac.engine.crashpoints import maybe_crash
from agac.engine.limits.budget import request_estimate
from agac.engine.values import Stopped
from agac.engine.walk.calls import backoff
from agac.errors import FatalError, ProviderError, WaitError
from agac.jsontext import dumps
from agac.prompt.render import RenderError, compile_template
from agac.providers.base import Message, Request, fingerprint_of
from agac.store.rows import AnswerRow

if TYPE_CHECKING:
    from jinja2 import Template

    from agac.config.model import CheckSpec, JudgeSpec
    from agac.engine.actions import ActionRuntime
    from agac.engine.limits.budget import Reservation
    from agac.engine.ports import UnitContext
    from agac.engine.values import UnitRecord
    from agac.providers.base import Provider, Response

__all__ = ["JUDGE_ORIGIN", "JUDGE_SCHEMA", "JUDGE_SYSTEM", "grade", "judge_request", "verdict_of"]

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["pass", "reason"],
    "additionalProperties": False,
}

JUDGE_SYSTEM = (
    "You grade one answer to a task. Reply with pass true when the answer is right and "
    "does what the instructions ask, false otherwise, and a one-sentence reason."
)


@lru_cache(maxsize=256)
def _template(text: str) -> Template:
    return compile_template(text, "judge")


def judge_request(judge: JudgeSpec, scope: Mapping[str, Any], timeout: float | None) -> Request:
    """The judge's request for the answer in ``scope`` (the unit's view plus ``answer``).
    Raises RenderError when its templates cannot be rendered."""
    system = _template(judge.system).render(**scope) if judge.system else JUDGE_SYSTEM
    prompt = _template(judge.prompt).render(**scope)
    return Request(
        provider=judge.provider,
        model=judge.model_name,
        messages=(Message("system", system), Message("user", prompt)),
        max_tokens=judge.max_tokens,
        temperature=0.0,
        schema=JUDGE_SCHEMA,
        timeout=timeout,
    )


async def grade(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    check: CheckSpec,
    scope: Mapping[str, Any],
    attempt: int,
) -> Verdict:
    """The judge's verdict on the answer in ``scope``: stored, or asked (and ledgered)."""
    assert check.judge is not None
    try:
        request = judge_request(check.judge, scope, rt.action.timeout)
    except RenderError as exc:
        return Verdict(check, False, f"the judge's prompt could not be rendered: {exc}")
    text = request.canonical()
    fp = fingerprint_of(text)
    stored = await ctx.lookups.lookup_answer(fp)
    if stored is not None:
        return verdict_of(check, json.loads(stored))
    provider = rt.judges.get(check.name)
    assert provider is not None, f"no provider opened for judge {check.name!r}"
    return await _ask(ctx, rt, rec, check, provider, request, text, fp, attempt)


async def _ask(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    check: CheckSpec,
    provider: Provider,
    request: Request,
    text: str,
    fp: str,
    attempt: int,
) -> Verdict:
    spec, clock = rt.action.retry, ctx.control.clock
    tries = 0
    while True:
        tries += 1
        held = await _reserve(ctx, check, request)
        started = clock.monotonic()
        try:
            response = await _complete(ctx, check, provider, request, held)
        except ProviderError as exc:
            await ctx.out.record_judge(rt, rec, attempt, request, None, exc, started, fp, None)
            if isinstance(exc, WaitError):  # the provider's "wait": no attempt spent
                tries -= 1
                delay = exc.retry_after or 1.0
            elif isinstance(exc, FatalError) or tries >= spec.max_attempts:
                return Verdict(check, False, f"the judge could not grade it: {exc}")
            else:
                delay = backoff(spec, tries)
            if await ctx.control.sleep(delay):
                raise Stopped() from exc
            continue
        output = _output(response)
        if output is None:
            error = ValueError(f"the judge's answer is not a verdict: {response.text[:200]!r}")
            await ctx.out.record_judge(
                rt, rec, attempt, request, response, error, started, fp, None
            )
            if tries >= spec.max_attempts:
                return Verdict(check, False, str(error))
            continue
        answer = AnswerRow(
            fp,
            request.provider,
            request.model,
            text,
            dumps({"text": response.text, "model": response.model}),
            dumps(output),
            clock.time(),
        )
        await ctx.out.record_judge(rt, rec, attempt, request, response, None, started, fp, answer)
        maybe_crash("judge_graded")  # the verdict is durable, the answer it graded not yet
        return verdict_of(check, output)


async def _reserve(ctx: UnitContext, check: CheckSpec, request: Request) -> Reservation | None:
    """The judge call's worst case held from the run's budget (None without a budget).
    Raises JudgeNotSent when the budget has no room for it."""
    budget = ctx.budget
    if budget is None:
        return None
    assert check.judge is not None
    await budget.refresh()  # worker mode: what other workers spent counts
    chars = sum(len(m.content) for m in request.messages)
    i, o = request_estimate(chars, request.max_tokens)
    held = budget.worst_case(check.judge.model, i, o, request.ledger_tier)
    if not budget.reserve(held):
        raise JudgeNotSent(
            f"the judge of check {check.name!r} was never sent: the budget "
            f"({budget.cap_text()}) has no room for its worst case"
        )
    return held


async def _complete(
    ctx: UnitContext,
    check: CheckSpec,
    provider: Provider,
    request: Request,
    held: Reservation | None,
) -> Response:
    """The judge's call; its reservation settled to what it used (0 when it raised)."""
    budget = ctx.budget
    if held is None or budget is None:
        return await provider.complete(request)
    assert check.judge is not None
    try:
        response = await provider.complete(request)
    except BaseException:
        budget.settle(held, 0.0, 0)
        raise
    budget.settle_usage(held, check.judge.model, response.total_usage, request.ledger_tier)
    return response


def _output(response: Response) -> dict[str, Any] | None:
    """The verdict the judge answered, or None when it is not of the schema's shape."""
    value = response.parsed
    if value is None:
        try:
            value = json.loads(response.text)
        except ValueError:
            return None
    if not isinstance(value, dict) or not isinstance(value.get("pass"), bool):
        return None
    return {"pass": value["pass"], "reason": str(value.get("reason") or "")}


def verdict_of(check: CheckSpec, output: dict[str, Any]) -> Verdict:
    """The verdict a judge's answer (the built-in schema's ``pass`` and ``reason``) gives."""
    if output.get("pass") is True:
        return Verdict(check, True)
    reason = str(output.get("reason") or "").strip()
    why = f"the judge says: {reason}" if reason else "the judge says it fails"
    if check.message:
        why = f"{check.message} ({why})"
    return Verdict(check, False, why)
