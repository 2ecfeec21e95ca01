"""What a unit sends and what it accepts back: an llm action's request rendered from its
view and the output accepted from a response (docs/providers.md: truncation, refusals, the
schema), a tool's call and the value it returned. Shared by the online walk, batch
ingest, approvals (the approved request) and the read-only views."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from typing import TYPE_CHECKING, Any

from agac.jsontext import flaw
from agac.keys import idempotency_key
from agac.media import AttachmentError, Destination
from agac.prompt.attachments import render_references, resolve_all
from agac.prompt.render import capped
from agac.providers.base import Attachment, Message, Request, Response
from agac.usercode import user_stdout

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.context import ToolContext
    from agac.jsontext import JSON, JSONObject

__all__ = [
    "Fail",
    "accept_response",
    "attachments_of",
    "build_request",
    "effect_id",
    "effect_key",
    "invoke_tool",
    "reprompt",
    "response_dict",
    "tool_input_hash",
    "tool_output",
    "tool_reuse_key",
]


class Fail(Exception):
    """A response or a tool value the unit cannot accept: its reason code (docs/guarantees.md, Reason codes),
    whether another attempt may do better, and what to tell the model when it does."""

    def __init__(self, reason: str, detail: str, *, retry: bool, feedback: str | None = None):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.retry = retry
        self.feedback = feedback


def _version(view: JSONObject) -> int | None:
    """The fan-out version index (``fan_out: {versions: N}``), sent as the provider's seed
    and so part of the fingerprint (docs/workflow-reference.md, Fan-out and join); None outside such a fan-out."""
    v = view.get("version")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def build_request(rt: ActionRuntime, view: JSONObject) -> Request:
    action = rt.action
    messages: list[Message] = []
    cap = action.max_prompt_chars
    if rt.system is not None:
        system = capped(rt.system, view, cap)
        cap -= len(system)
        messages.append(Message("system", system))
    assert rt.prompt is not None
    if rt.prefix:  # the run's rendered context_prefix, then the record's prompt
        text = rt.prefix + capped(rt.prompt, view, max(cap - len(rt.prefix), 0))
    else:
        text = capped(rt.prompt, view, max(cap, 0))
    cache = rt.cache
    if cache is not None and not text.startswith(rt.cache_head, len(rt.prefix)):
        cache = rt.cache_fallback  # whitespace control ate into the literal head
    if rt.attachments:
        messages.append(
            Message(
                "user",
                text,
                attachments_of(rt, view),
                "after" if action.attachments_position == "after" else "before",
            )
        )
    else:
        messages.append(Message("user", text))
    return Request(
        provider=action.provider or "",
        model=action.model_name or "",
        messages=tuple(messages),
        max_tokens=action.max_tokens or 1024,
        temperature=action.temperature,
        schema=action.schema,
        timeout=action.timeout,
        seed=_version(view),
        cache=cache,
        options=tuple(sorted(action.provider_options.items())),
        tier="flex" if action.run_mode == "flex" else None,
        tools=rt.tool_defs,
        web_search=action.web_search,
    )


def attachments_of(rt: ActionRuntime, view: dict[str, Any]) -> tuple[Attachment, ...]:
    """The files the action's ``attachments:`` name for this view, read, described and
    checked against what its provider and model accept. RenderError when a template
    fails; AttachmentError (its ``reason`` a reason code) when a file cannot be sent."""
    action = rt.action
    assert rt.reach is not None
    provider, model = action.provider or "", action.model_name or ""
    found = resolve_all(
        render_references(rt.attachments, view), rt.reach, Destination(provider, rt.limits)
    )
    if not found:
        return ()
    for a in found:
        was = rt.admitted.get(a.path)
        if was is not None and was[0] != a.sha256:
            raise AttachmentError(
                reason="attachment_changed",
                message=f"{a.name} changed "
                f"since the run was admitted (it was sha256:{was[0][:12]}, "
                f"{was[1]:,} bytes; it is {a.describe()})",
                hint="run again with --new to send the file as it is now",
            )
    if rt.limits is None:
        raise AttachmentError(
            reason="attachment_not_supported",
            message=f"provider {provider} takes no "
            f"attachments (model {model}): {found[0].describe()}",
            hint="use a provider that reads images and PDFs",
        )
    rt.limits.check(provider, model, found)
    return found


def accept_response(rt: ActionRuntime, response: Response) -> JSON:
    """The unit's output from a response, or Fail with the reason (docs/providers.md; docs/guarantees.md, Reason codes).

    Only a stop that means a complete answer (``end``) gives an output; the stop was read
    by the adapter (:func:`agac.providers.stops.read_stop`), and its detail — a refusal's
    category and explanation, a filter's safety category, an unexpected stop's raw value
    — is the failure's detail."""
    stop = response.stop_reason
    if stop == "refusal":
        said = response.refusal or response.text[:200] or "the model declined to answer"
        more = response.stop_detail if response.stop_detail not in (None, "", said) else None
        raise Fail(
            "refusal", f"the model refused: {said}" + (f" ({more})" if more else ""), retry=False
        )
    if stop == "content_filter":
        where = ", ".join(x for x in (response.raw_stop, response.stop_detail) if x)
        raise Fail(
            "content_filter",
            "the provider's content filter stopped the answer" + (f" ({where})" if where else ""),
            retry=False,
        )
    if stop not in ("end", "max_tokens"):  # unexpected, or a pause nobody continued
        raise Fail(
            "unexpected_stop",
            response.stop_detail
            or f"the provider stopped with "
            f"{response.raw_stop or stop!r}, which is not a complete answer",
            retry=False,
        )
    if stop == "max_tokens":
        raise Fail(
            "truncated",
            f"the answer hit max_tokens ({rt.action.max_tokens})",
            retry=True,
            feedback="Your previous answer was cut off at the token limit. Answer again, "
            "shorter, complete and within the limit.",
        )
    if rt.validator is None:
        return {"text": response.text}
    value = response.parsed
    if value is None:
        try:
            value = json.loads(_strip_fences(response.text))
        except ValueError as exc:
            raise Fail(
                "schema_invalid",
                f"the answer is not JSON: {exc}",
                retry=True,
                feedback=f"Your previous answer was not valid JSON ({exc}). Answer again "
                "with only a JSON value that matches the schema.",
            ) from exc
    found = flaw(value)  # json.loads reads NaN and Infinity, which are not JSON
    if found is not None:
        raise Fail(
            "schema_invalid",
            f"the answer holds {found}, which JSON cannot hold",
            retry=True,
            feedback=f"Your previous answer held {found}, which is not "
            "JSON. Answer again with only strict JSON that matches the schema.",
        )
    if rt.validator.is_valid(value):
        return value
    errors = sorted(rt.validator.iter_errors(value), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "(root)"
        msg = f"{where}: {errors[0].message}"
        raise Fail(
            "schema_invalid",
            f"the answer does not match the schema: {msg}",
            retry=True,
            feedback=f"Your previous answer did not match the JSON schema: {msg}. Answer "
            "again with only JSON that matches the schema.",
        )
    return value


def _strip_fences(text: str) -> str:
    s = text.strip()
    if s.startswith("```"):
        s = s.split("\n", 1)[1] if "\n" in s else ""
        if s.rstrip().endswith("```"):
            s = s.rstrip()[:-3]
    return s


def reprompt(request: Request, response: Response, fail: Fail) -> Request:
    """The original request plus the bad answer and what was wrong with it."""
    messages = request.messages + (
        Message("assistant", response.text),
        Message("user", fail.feedback or fail.detail),
    )
    return Request(
        provider=request.provider,
        model=request.model,
        messages=messages,
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        schema=request.schema,
        timeout=request.timeout,
        seed=request.seed,
        cache=request.cache,
        options=request.options,
        tier=request.tier,
        tools=request.tools,
    )


def response_dict(r: Response) -> dict[str, Any]:
    return {
        "text": r.text,
        "model": r.model,
        "stop_reason": r.stop_reason,
        "usage": r.usage.to_dict(),
        "service_tier": r.service_tier,
        "latency_ms": round(r.latency_ms, 3),
        "refusal": r.refusal,
        **({"citations": [c.to_dict() for c in r.citations]} if r.citations else {}),
    }


# -- tools --------------------------------------------------------------------------------


def tool_input_hash(function: str | None, inputs_json: str) -> str:
    """A tool's arguments hash (its function and canonical inputs): an effect is stored and
    keyed by it (E1), never by its code, so an edited effect is not called again for
    arguments it already acted on. A tool's reusable results: :func:`tool_reuse_key`."""
    return hashlib.sha256(f"{function}\x1f{inputs_json}".encode()).hexdigest()


def tool_reuse_key(rt: ActionRuntime, workflow: str, unit_key: str, inputs_json: str) -> str:
    """What a tool's result is stored and looked up under: everything the call could read
    — its function's name and code (:attr:`ActionRuntime.code`), its canonical inputs and,
    unless the action says ``reuse: by_inputs``, the unit it ran for (workflow, action,
    unit key: ``ctx`` names them). Decision 0096."""
    action = rt.action
    unit = "" if action.reuse == "by_inputs" else f"{workflow}\x1f{action.name}\x1f{unit_key}"
    text = f"{action.function}\x1f{rt.code}\x1f{unit}\x1f{inputs_json}"
    return hashlib.sha256(text.encode()).hexdigest()


def effect_key(tenant: str, workflow: str, action: str, unit_key: str, input_hash: str) -> str:
    """E1: the idempotency key of a tool call — stable across retries, restarts and runs
    for the same (workflow, action, unit, arguments), new when the arguments change. It
    starts with the tenant (``<tenant>:<hash>``, T2): two tenants running the same workflow
    over the same records never share an effect."""
    return f"{tenant}:{idempotency_key(workflow, action, unit_key, input_hash)}"  # agac/keys.py


def effect_id(key: str) -> str:
    """How people name an effect: its key without the ``<tenant>:`` start."""
    return key.partition(":")[2] or key


async def invoke_tool(fn: Any, inputs: dict[str, Any], ctx: ToolContext) -> Any:
    """Call a tool function, sync (in a thread) or async, as ``fn(inputs, ctx)``; what it
    prints goes to stderr (agac's stdout is its own)."""
    with user_stdout():
        if inspect.iscoroutinefunction(fn):
            return await fn(inputs, ctx)
        result = await asyncio.to_thread(fn, inputs, ctx)
        if inspect.isawaitable(result):
            result = await result
        return result


def tool_output(rt: ActionRuntime, value: Any) -> Any:
    """A tool's return value as JSON data, checked against the action's schema. Strict
    JSON only: a NaN, an infinity or a lone surrogate fails the unit ``tool_error``
    naming where it is, so nothing that is not JSON is stored or exported."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")  # a lone surrogate cannot be encoded (nor stored)
    except (TypeError, ValueError) as exc:
        found = flaw(value) if isinstance(exc, ValueError) else None
        if found is not None:
            raise Fail(
                "tool_error",
                f"the tool returned {found}, which JSON cannot hold; return {found.fix} there",
                retry=False,
            ) from exc
        raise Fail(
            "tool_error", f"the tool returned a value that is not JSON: {exc}", retry=False
        ) from exc
    value = json.loads(text)
    if rt.validator is not None:
        errors = list(rt.validator.iter_errors(value))
        if errors:
            raise Fail(
                "schema_invalid",
                f"the tool's value does not match the schema: {errors[0].message}",
                retry=False,
            )
    return value
