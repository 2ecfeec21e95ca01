"""What happens to one unit (record x action) in an online run.

Order of decisions for a unit, each final for it:

1. already settled in this run (an earlier invocation, or carried over by a retry) -> as is;
2. the record is invalid -> ``failed`` (``invalid_input``/``duplicate_key``) where the
   action reads records directly (no dependencies), ``skipped upstream_failed`` below;
3. a dependency failed -> ``skipped upstream_failed``; a dependency skipped -> skipped with
   the same reason (so a guard's skip flows down as ``guard`` and a run can still succeed);
4. the run is stopping (Ctrl-C) -> no outcome: the unit stays pending for the next run;
5. the guard is false -> ``skipped guard``;
6. llm: render, fingerprint; a failure carried over from the previous run with the same
   fingerprint (R1 c) -> ``failed`` with the same reason, no call; an answer stored under
   the fingerprint (S5) -> ``answered`` (reused); an identical request in flight in this
   run -> share its answer (single-flight); else call with retries.
   tool: same with the tool-result cache instead of answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agac.engine.actions import is_batched
from agac.engine.context import ToolContext
from agac.engine.limits import backoff_delay, estimate_tokens
from agac.errors import FatalError, ProviderError, UnsupportedError, WaitError
from agac.keys import idempotency_key
from agac.prompt.render import RenderError, render
from agac.providers.base import Message, Request, Response, canonical_json, fingerprint_of
from agac.store.repository import dumps
from agac.usercode import describe, fails_only_its_unit, is_retryable

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.executor import Executor

__all__ = ["Fail", "Settled", "Stopped", "accept_response", "act", "build_request", "invoke_tool",
           "response_dict", "run_unit", "tool_output"]


@dataclass(frozen=True, slots=True)
class Settled:
    """A unit's outcome as the rest of the record's pipeline sees it."""

    status: str
    reason: str | None = None
    output: Any = None


class Fail(Exception):
    def __init__(self, reason: str, detail: str, *, retry: bool, feedback: str | None = None):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.retry = retry
        self.feedback = feedback


async def run_unit(
    ex: Executor, rt: ActionRuntime, rec: Any, payload: Any, results: dict[str, Settled],
    extra: dict[str, Any] | None = None,
) -> Settled | None:
    """``extra`` are roots the unit sees besides ``source`` and its ancestors' outputs: a
    fan-out's item, a join's ``fulfilled``/``rejected``/``skipped`` (engine/fanout.py).
    A dependency missing from ``results`` is a join's per-item input, judged there."""
    action = rt.action
    if rec.reason:
        if not action.dependencies:
            return await ex.settle(rt, rec, "failed", rec.reason, rec.error)
        return await ex.settle(rt, rec, "skipped", "upstream_failed", "the input record is invalid")
    for dep in action.dependencies:
        r = results.get(dep)
        if r is None:
            continue
        if r.status == "failed":
            return await ex.settle(rt, rec, "skipped", "upstream_failed", f"{dep} failed: {r.reason}")
        if r.status == "skipped":
            return await ex.settle(rt, rec, "skipped", r.reason, f"{dep} was skipped: {r.reason}")
    if ex.stopping:
        return None
    outputs = {a: r.output for a in action.ancestors
               if (r := results.get(a)) is not None and r.status == "answered"}
    view = rt.view.build(payload, outputs)
    if extra:
        view.update(extra)
    try:
        if rt.guard is not None and not _guard(rt, view):
            return await ex.settle(rt, rec, "skipped", "guard", f"guard {action.when!r} is false")
        if rt.stopped:
            return await ex.settle(rt, rec, "failed", "provider_error", rt.stopped)
        if action.approval is not None:
            return await ex.approvals.gate(rt, rec, view)  # type: ignore[no-any-return]  # A1
        return await act(ex, rt, rec, view)
    except RenderError as exc:
        return await ex.settle(rt, rec, "failed", "render_error", str(exc))


async def act(ex: Executor, rt: ActionRuntime, rec: Any, view: dict[str, Any],
              request: Request | None = None) -> Settled | None:
    """Call the unit's tool with ``view`` as its inputs, or send its llm request (rendered
    from ``view``, or ``request`` as given: an approved proposal's, engine/approvals.py)."""
    if rt.action.kind == "tool":
        return await _run_tool(ex, rt, rec, view)
    return await _run_llm(ex, rt, rec, view, request)


def _guard(rt: ActionRuntime, view: dict[str, Any]) -> bool:
    from jinja2.exceptions import UndefinedError

    try:
        return bool(rt.guard(view))
    except UndefinedError:
        return False
    except Exception as exc:
        raise RenderError(f"guard {rt.action.when!r} failed: {type(exc).__name__}: {exc}") from exc


def _version(view: dict[str, Any]) -> int | None:
    """The fan-out version index (``fan_out: {versions: N}``), sent as the provider's seed
    and so part of the fingerprint (DESIGN §11); None outside such a fan-out."""
    v = view.get("version")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def build_request(rt: ActionRuntime, view: dict[str, Any]) -> Request:
    action = rt.action
    messages: list[Message] = []
    if rt.system is not None:
        messages.append(Message("system", render(rt.system, view)))
    assert rt.prompt is not None
    messages.append(Message("user", render(rt.prompt, view)))
    return Request(
        provider=action.provider or "",
        model=action.model_name or "",
        messages=tuple(messages),
        max_tokens=action.max_tokens or 1024,
        temperature=action.temperature,
        schema=action.schema,
        timeout=action.timeout,
        seed=_version(view),
    )


async def _run_llm(ex: Executor, rt: ActionRuntime, rec: Any, view: dict[str, Any],
                   given: Request | None = None) -> Settled | None:
    if ex.batch is not None and is_batched(rt):
        own = ex.own_batch_item(rt, rec.key)
        if own is not None and ex.own_item_decides(own):
            # Staged or sent by this very run, from the same inputs: its fingerprint is
            # this unit's, so the unit needs no rendering to wait on it or to settle.
            return await ex.settle_from_own_item(rt, rec, own)
    prefetched = ex.prefetched.pop((rt.name, rec.key), None)
    if given is not None:  # an approved proposal's request, not the rendered one
        prefetched = None
    if prefetched is not None:
        request, request_json, fp, stored = prefetched
    else:
        request = given if given is not None else build_request(rt, view)
        request_json = request.canonical()
        fp = fingerprint_of(request_json)
        stored = None if ex.fresh else await ex.gateway.lookup_answer(fp)
    carried = ex.carried_failure(rt.name, rec.key, fp)
    if carried is not None:
        return await ex.settle(rt, rec, "failed", carried[0], carried[1], origin="carried", fingerprint=fp)
    batched = ex.batch is not None and is_batched(rt)
    if ex.fresh and batched and ex.batch_answer_is_ours(rt, rec, fp):
        stored = await ex.gateway.lookup_answer(fp)  # --fresh still reads its own batches
    if stored is not None:
        origin, attempts = ex.batch_origin(rt, rec, fp) if batched else ("reused", 0)
        return await ex.settle(rt, rec, "answered", output=json.loads(stored), origin=origin,
                               fingerprint=fp, output_json=stored, attempts=attempts)
    if batched:
        return await ex.batch_unit(rt, rec, request_json, fp)
    shared = ex.inflight.get(fp)
    if shared is not None:
        status, reason, detail, output = await asyncio.shield(shared)
        origin = "reused" if status == "answered" else "call"
        return await ex.settle(rt, rec, status, reason, detail, output=output, origin=origin, fingerprint=fp)
    fut: asyncio.Future[tuple[str, str | None, str | None, Any]] = asyncio.get_running_loop().create_future()
    ex.inflight[fp] = fut
    try:
        settled = await _call_with_retries(ex, rt, rec, request, fp, request_json)
        fut.set_result(settled)
    except BaseException as exc:
        fut.set_exception(exc)
        fut.exception()  # mark retrieved: waiters re-raise it themselves
        raise
    finally:
        ex.inflight.pop(fp, None)
    return Settled(settled[0], settled[1], settled[3])


async def _call_with_retries(
    ex: Executor, rt: ActionRuntime, rec: Any, request: Request, fp: str, request_json: str
) -> tuple[str, str | None, str | None, Any]:
    """Call until answered or out of attempts; commit the outcome while holding the slot."""
    action = rt.action
    spec = action.retry
    attempt = 0
    current = request
    while True:
        attempt += 1
        delay = 0.0
        ex.marks.expect(rt.name, action.max_concurrency, rec.key, rec.seq, fp, current)
        try:
            async with rt.slots:
                if ex.stopping:
                    raise Stopped()  # never sent, or not sent again: pending for the next run
                if ex.deadline_at is not None and time.time() >= ex.deadline_at:
                    sent = "never sent" if attempt == 1 else f"not sent again after {attempt - 1} attempts"
                    return await _final(ex, rt, rec, "skipped", "deadline",
                                        f"{sent}: the run's deadline passed", None, fp, attempt - 1)
                held = None
                if ex.budget is not None:
                    await ex.budget.refresh()  # worker mode: what other workers spent counts
                    held = ex.budget.for_request(action, current)
                    if not ex.budget.reserve(held):
                        return await _final(ex, rt, rec, "skipped", "budget_exhausted",
                                            _exhausted_detail(ex, attempt), None, fp, attempt - 1)
                if rt.limiter.active:
                    est = estimate_tokens(sum(len(m.content) for m in current.messages)) + current.max_tokens
                    waited = await rt.limiter.acquire(est, stop=ex.stop_signal)
                    if waited is None:  # stopped while waiting for room: nothing was sent
                        if held is not None and ex.budget is not None:
                            ex.budget.settle(held, 0.0, 0)
                        raise Stopped()
                    if waited > 1:
                        await ex.event("waiting", rt.name, rec.key, reason="rate_budget",
                                       seconds=round(waited, 3))
                await ex.marks.send(rt.name, rec.key, current)  # S1: listed before it is sent
                started = time.monotonic()
                try:
                    response = await _complete(ex, rt, current, held)
                except WaitError as exc:
                    await ex.record_call(rt, rec, attempt, current, None, exc, started, fp)
                    attempt -= 1
                    delay = exc.retry_after or 1.0
                    await ex.event("waiting", rt.name, rec.key, reason="provider_limit", seconds=delay)
                except UnsupportedError as exc:
                    await ex.record_call(rt, rec, attempt, current, None, exc, started, fp)
                    rt.stopped = f"{action.name} cannot run: {exc}"
                    return await _final(ex, rt, rec, "failed", "provider_error", str(exc), None, fp, attempt)
                except FatalError as exc:
                    await ex.record_call(rt, rec, attempt, current, None, exc, started, fp)
                    return await _final(ex, rt, rec, "failed", exc.reason or "provider_error", str(exc), None, fp, attempt)
                except ProviderError as exc:
                    await ex.record_call(rt, rec, attempt, current, None, exc, started, fp)
                    if attempt >= spec.max_attempts:
                        return await _final(ex, rt, rec, "failed", "provider_error",
                                            f"after {attempt} attempts: {exc}", None, fp, attempt)
                    delay = _backoff(spec, attempt)
                else:
                    try:
                        output = accept_response(rt, response)
                    except Fail as fail:
                        await ex.record_call(rt, rec, attempt, current, response, fail, started, fp)
                        if not fail.retry or attempt >= spec.max_attempts:
                            return await _final(ex, rt, rec, "failed", fail.reason, fail.detail, None, fp, attempt)
                        # Ask again with the error fed back, after the same backoff as any
                        # retryable failure (DESIGN §5).
                        current = _reprompt(request, response, fail)
                        delay = _backoff(spec, attempt)
                        output = _NO_ANSWER
                    if output is not _NO_ANSWER:
                        return await _answered(ex, rt, rec, request, request_json, response, output,
                                               current, attempt, started, fp)
        finally:
            ex.marks.release(rt.name, rec.key)
        if ex.stopping or await ex.stop_signal.sleep(delay):
            raise Stopped()


_NO_ANSWER = object()


async def _complete(ex: Executor, rt: ActionRuntime, request: Request, held: Any) -> Response:
    """One call; with a budget, its reservation is settled to the call's actual usage
    (a call that raised has no usage: it is settled at 0, as the ledger records it)."""
    budget = ex.budget
    if held is None or budget is None:
        return await rt.provider.complete(request)
    try:
        response = await rt.provider.complete(request)
    except BaseException:
        budget.settle(held, 0.0, 0)
        raise
    budget.settle_usage(held, rt.action.model or "", response.usage)
    return response


def _exhausted_detail(ex: Executor, attempt: int) -> str:
    b = ex.budget
    assert b is not None
    cap = " and ".join(x for x in (f"${b.usd:g}" if b.usd is not None else "",
                                   f"{b.tokens} tokens" if b.tokens is not None else "") if x)
    sent = "never sent" if attempt == 1 else f"not sent again after {attempt - 1} attempts"
    return f"{sent}: the budget ({cap}) has no room for its worst case"


async def _answered(
    ex: Executor, rt: ActionRuntime, rec: Any, request: Request, request_json: str,
    response: Response, output: Any, current: Request, attempt: int, started: float, fp: str,
) -> tuple[str, str | None, str | None, Any]:
    """Commit an accepted answer: stored under the ORIGINAL request's fingerprint (a reprompt
    is how we got it, not what was asked), with its usage row."""
    usage_row = ex.usage_row(rt, rec, attempt, current, response, None, started, fp)
    output_json = dumps(output)
    answer = {
        "fingerprint": fp, "provider": request.provider, "model": request.model,
        "request": request_json, "response": dumps(response_dict(response)),
        "output": output_json, "created_at": time.time(),
    }
    return await _final(ex, rt, rec, "answered", None, None, output, fp, attempt,
                        answers=[answer], usage=[usage_row], output_json=output_json)


class Stopped(Exception):
    """The run is stopping; this unit stays pending."""


async def _final(
    ex: Executor, rt: ActionRuntime, rec: Any, status: str, reason: str | None, detail: str | None,
    output: Any, fp: str, attempts: int, *, answers: list[dict[str, Any]] | None = None,
    usage: list[dict[str, Any]] | None = None, output_json: str | None = None,
) -> tuple[str, str | None, str | None, Any]:
    await ex.settle(rt, rec, status, reason, detail, output=output, origin="call", fingerprint=fp,
                    attempts=attempts, answers=answers, usage=usage, output_json=output_json)
    return status, reason, detail, output


def _backoff(spec: Any, attempt: int) -> float:
    return backoff_delay(
        attempt, initial=spec.backoff_initial, maximum=spec.backoff_max,
        multiplier=spec.backoff_multiplier, jitter=spec.jitter,
    )


def accept_response(rt: ActionRuntime, response: Response) -> Any:
    """The unit's output from a response, or Fail with the reason (DESIGN §5, §7.2)."""
    if response.stop_reason == "refusal":
        raise Fail("refusal", f"the model refused: {response.refusal or response.text[:200]}", retry=False)
    if response.stop_reason == "content_filter":
        raise Fail("content_filter", "the provider's content filter stopped the answer", retry=False)
    if response.stop_reason == "max_tokens":
        raise Fail("truncated", f"the answer hit max_tokens ({rt.action.max_tokens})", retry=True,
                    feedback="Your previous answer was cut off at the token limit. Answer again, "
                             "shorter, complete and within the limit.")
    if rt.validator is None:
        return {"text": response.text}
    value = response.parsed
    if value is None:
        try:
            value = json.loads(_strip_fences(response.text))
        except ValueError as exc:
            raise Fail("schema_invalid", f"the answer is not JSON: {exc}", retry=True,
                        feedback=f"Your previous answer was not valid JSON ({exc}). Answer again "
                                 "with only a JSON value that matches the schema.") from exc
    if rt.validator.is_valid(value):
        return value
    errors = sorted(rt.validator.iter_errors(value), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "(root)"
        msg = f"{where}: {errors[0].message}"
        raise Fail("schema_invalid", f"the answer does not match the schema: {msg}", retry=True,
                    feedback=f"Your previous answer did not match the JSON schema: {msg}. Answer "
                             "again with only JSON that matches the schema.")
    return value


def _strip_fences(text: str) -> str:
    s = text.strip()
    if s.startswith("```"):
        s = s.split("\n", 1)[1] if "\n" in s else ""
        if s.rstrip().endswith("```"):
            s = s.rstrip()[:-3]
    return s


def _reprompt(request: Request, response: Response, fail: Fail) -> Request:
    """The original request plus the bad answer and what was wrong with it."""
    messages = request.messages + (
        Message("assistant", response.text),
        Message("user", fail.feedback or fail.detail),
    )
    return Request(
        provider=request.provider, model=request.model, messages=messages,
        max_tokens=request.max_tokens, temperature=request.temperature, schema=request.schema,
        timeout=request.timeout, seed=request.seed,
    )


def response_dict(r: Response) -> dict[str, Any]:
    return {
        "text": r.text, "model": r.model, "stop_reason": r.stop_reason,
        "usage": r.usage.to_dict(), "service_tier": r.service_tier,
        "latency_ms": round(r.latency_ms, 3), "refusal": r.refusal,
    }


# -- tools --------------------------------------------------------------------------------


async def _run_tool(ex: Executor, rt: ActionRuntime, rec: Any, view: dict[str, Any]) -> Settled:
    action = rt.action
    try:
        inputs_json = canonical_json(view)
    except (TypeError, ValueError) as exc:  # pragma: no cover - views are JSON data
        return await ex.settle(rt, rec, "failed", "tool_error", f"inputs are not JSON: {exc}")
    input_hash = hashlib.sha256(f"{action.function}\x1f{inputs_json}".encode()).hexdigest()
    if action.effect is not None:
        key = idempotency_key(ex.workflow.name, action.name, rec.key, input_hash)
        return await ex.effect_unit(rt, rec, inputs_json, input_hash, key)  # type: ignore[return-value]
    if action.cache and not ex.fresh:
        stored = await ex.gateway.lookup_tool_result(input_hash)
        if stored is not None:
            return await ex.settle(rt, rec, "answered", output=json.loads(stored), origin="reused",
                                   fingerprint=input_hash)
    if ex.deadline_passed():
        return await ex.settle(rt, rec, "skipped", "deadline", "never called: the run's deadline passed")
    idem = idempotency_key(ex.workflow.name, action.name, rec.key, input_hash)
    spec = action.retry
    attempt = 0
    while True:
        attempt += 1
        async with rt.slots:
            if ex.stopping:
                return None  # type: ignore[return-value]
            # At a join the view holds the items (engine/fanout.py); the names are reserved.
            ctx = ToolContext(ex.run_id, ex.workflow.name, action.name,
                              getattr(rec, "record_key", rec.key), getattr(rec, "item_key", None),
                              attempt, idem, list(view.get("fulfilled", ())),
                              list(view.get("rejected", ())))
            started = time.monotonic()
            try:
                value = await invoke_tool(rt.function, json.loads(inputs_json), ctx)
                output = tool_output(rt, value)
            except Fail as fail:
                await ex.record_tool(rt, rec, attempt, started, fail.detail, input_hash)
                return await _tool_final(ex, rt, rec, "failed", fail.reason, fail.detail, None, input_hash, attempt)
            except BaseException as exc:  # user code: it fails its unit, never agac
                if not fails_only_its_unit(exc):
                    raise
                tb = ex.redact(traceback.format_exc())
                detail = ex.redact(describe(exc))
                await ex.record_tool(rt, rec, attempt, started, tb, input_hash)
                if not is_retryable(exc) or attempt >= spec.max_attempts:
                    return await _tool_final(ex, rt, rec, "failed", "tool_error", detail, None,
                                             input_hash, attempt, traceback_text=tb)
                delay = _tool_retry_delay(exc, spec, attempt)
            else:
                usage = [ex.tool_usage_row(rt, rec, attempt, started, None, input_hash)]
                cached = [{"input_hash": input_hash, "function": action.function or "",
                           "output": dumps(output), "created_at": time.time()}] if action.cache else []
                return await _tool_final(ex, rt, rec, "answered", None, None, output, input_hash,
                                         attempt, usage=usage, tool_results=cached)
        if ex.stopping or await ex.stop_signal.sleep(delay):
            return None  # type: ignore[return-value]


def _tool_retry_delay(exc: BaseException, spec: Any, attempt: int) -> float:
    """The tool's own hint (``RetryableError(retry_after=…)``) or the action's backoff."""
    hint = getattr(exc, "retry_after", None)
    return float(hint) if isinstance(hint, (int, float)) and hint >= 0 else _backoff(spec, attempt)


async def invoke_tool(fn: Any, inputs: dict[str, Any], ctx: ToolContext) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(inputs, ctx)
    result = await asyncio.to_thread(fn, inputs, ctx)
    if inspect.isawaitable(result):
        result = await result
    return result


def tool_output(rt: ActionRuntime, value: Any) -> Any:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise Fail("tool_error", f"the tool returned a value that is not JSON: {exc}", retry=False) from exc
    value = json.loads(text)
    if rt.validator is not None:
        errors = list(rt.validator.iter_errors(value))
        if errors:
            raise Fail("schema_invalid", f"the tool's value does not match the schema: {errors[0].message}",
                        retry=False)
    return value


async def _tool_final(
    ex: Executor, rt: ActionRuntime, rec: Any, status: str, reason: str | None, detail: str | None,
    output: Any, input_hash: str, attempts: int, *, usage: list[dict[str, Any]] | None = None,
    tool_results: list[dict[str, Any]] | None = None, traceback_text: str | None = None,
) -> Settled:
    return await ex.settle(rt, rec, status, reason, detail, output=output, origin="call",
                           fingerprint=input_hash, attempts=attempts, usage=usage,
                           tool_results=tool_results, traceback_text=traceback_text)

