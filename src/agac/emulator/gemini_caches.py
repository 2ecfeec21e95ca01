"""Gemini's explicit context caches: ``cachedContents`` create, get, list and delete, and
what a request naming one (``cachedContent``) is answered.

A cache holds a system instruction and contents, as sent; its tokens are counted as every
prompt is (``ceil(chars / 4)``) and must reach the model's minimum (4,096 for Pro models,
1,024 for the others), else Gemini's 400 ``Cached content is too small``. It lives ``ttl``
(default one hour) or until ``expireTime``, in emulator time. A request naming a cache
the emulator does not have — never created, deleted, or expired — is refused as Gemini
refuses it: 403 ``PERMISSION_DENIED`` ``CachedContent not found (or permission denied)``;
one that also sets a system instruction or tools, or names another model than the
cache's, gets Gemini's 400. A request naming a live cache is answered as if its contents
came first: the cache's tokens are its ``cachedContentTokenCount``, a part of its
``promptTokenCount``. A batch item naming a cache is refused (403) when the cache is gone
by the time the batch runs it.

Deleted caches are kept (``deleted_at`` set): ``GET /_emulator/caches`` lists every cache
created since the last reset with how many live calls and batch items named it.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .answers import count_tokens, text_chars
from .handling import ErrorRenderer, gate, read_json, state_of
from .media import attachment_tokens
from .state import CACHE_NOT_FOUND, CachedContent, EmulatorState

__all__ = ["caches_document", "expanded", "own_tokens", "refusal", "routes"]

PROVIDER = "gemini"
DEFAULT_TTL = 3600.0
_TTL = re.compile(r"^(\d+(?:\.\d+)?)s$")


def minimum(model: str) -> int:
    """The fewest tokens Gemini caches for ``model``."""
    return 4096 if "pro" in model else 1024


def refusal(state: EmulatorState, model: str, body: dict[str, Any]) -> tuple[int, str] | None:
    """Why a GenerateContentRequest naming ``cachedContent`` cannot be answered, as
    (status, message), or None: it names no cache, or a live one it may use."""
    name = body.get("cachedContent")
    if not name:
        return None
    cache = state.caches.get(str(name).removeprefix("cachedContents/"))
    if cache is None or not cache.alive(state.clock.now()):
        state.cache_refusals += 1
        return 403, CACHE_NOT_FOUND
    if any(body.get(k) for k in ("systemInstruction", "tools", "toolConfig")):
        return 400, (
            "CachedContent can not be used with GenerateContent request setting "
            "system_instruction, tools or tool_config.\n\nProposed fix: move those "
            "values to CachedContent from GenerateContent request."
        )
    if cache.model != model.removeprefix("models/"):
        return 400, (
            f"Model used by GenerateContent request (models/{model}) and "
            f"CachedContent (models/{cache.model}) has to be the same."
        )
    return None


def expanded(
    state: EmulatorState, body: dict[str, Any]
) -> tuple[dict[str, Any], CachedContent | None]:
    """The request as if it had sent the contents of the cache it names (its system
    instruction, then its contents before the request's), and that cache; the request
    itself and None when it names none the emulator has."""
    name = body.get("cachedContent")
    cache = state.caches.get(str(name).removeprefix("cachedContents/")) if name else None
    if cache is None:
        return body, None
    whole = {k: v for k, v in body.items() if k != "cachedContent"}
    if cache.system is not None:
        whole["systemInstruction"] = cache.system
    whole["contents"] = [*cache.contents, *(body.get("contents") or [])]
    return whole, cache


def own_tokens(body: dict[str, Any]) -> int:
    """The prompt tokens a request naming a cache sends itself (what is not cached)."""
    return count_tokens(
        text_chars([body.get("systemInstruction") or {}, body.get("contents") or []])
    ) + attachment_tokens(body)


def _resource(cache: CachedContent) -> dict[str, Any]:
    """A ``CachedContent`` resource (the contents are not echoed, as Gemini does)."""
    body: dict[str, Any] = {
        "name": f"cachedContents/{cache.id}",
        "model": f"models/{cache.model}",
        "createTime": _stamp(cache.created_at),
        "updateTime": _stamp(cache.created_at),
        "expireTime": _stamp(cache.expires_at),
        "usageMetadata": {"totalTokenCount": cache.tokens},
    }
    if cache.display_name:
        body["displayName"] = cache.display_name
    return body


def _lifetime(body: dict[str, Any], now: float) -> float | None:
    """When a cache created now with ``body`` expires; None when its ttl is malformed."""
    if body.get("expireTime"):
        try:
            return datetime.fromisoformat(str(body["expireTime"])).timestamp()
        except ValueError:
            return None
    ttl = body.get("ttl")
    if ttl is None:
        return now + DEFAULT_TTL
    found = _TTL.match(str(ttl))
    return now + float(found.group(1)) if found else None


def _create(error: ErrorRenderer) -> Any:
    async def create(request: Request) -> Response:
        state = state_of(request)
        body = await read_json(request, error)
        await gate(request, PROVIDER, "cache.create", error)
        model = str(body.get("model") or "").removeprefix("models/")
        if not model:
            return error(
                400,
                None,
                None,
                "* CreateCachedContentRequest.cached_content.model: model is required",
            )
        now = state.clock.now()
        expires = _lifetime(body, now)
        if expires is None:
            return error(
                400,
                None,
                None,
                f'Invalid ttl {body.get("ttl")!r}: a duration in seconds, as "300s", is expected.',
            )
        system, contents = body.get("systemInstruction"), list(body.get("contents") or [])
        tokens = count_tokens(text_chars([system or {}, contents]))
        least = minimum(model)
        if tokens < least:
            return error(
                400,
                None,
                None,
                f"Cached content is too small. total_token_count="
                f"{tokens}, min_total_token_count={least}",
            )
        cache = CachedContent(
            uuid.uuid4().hex[:16],
            model,
            body.get("displayName"),
            system,
            contents,
            tokens,
            now,
            expires,
        )
        state.caches[cache.id] = cache
        return JSONResponse(_resource(cache))

    return create


def _found(state: EmulatorState, cache_id: str) -> CachedContent | None:
    cache = state.caches.get(cache_id)
    return cache if cache is not None and cache.alive(state.clock.now()) else None


def _get(error: ErrorRenderer) -> Any:
    async def get(request: Request) -> Response:
        state = state_of(request)
        await gate(request, PROVIDER, "cache.get", error)
        cache = _found(state, request.path_params["id"])
        if cache is None:
            return error(403, None, None, CACHE_NOT_FOUND)
        return JSONResponse(_resource(cache))

    return get


def _delete(error: ErrorRenderer) -> Any:
    async def delete(request: Request) -> Response:
        state = state_of(request)
        await gate(request, PROVIDER, "cache.delete", error)
        cache = _found(state, request.path_params["id"])
        if cache is None:
            return error(403, None, None, CACHE_NOT_FOUND)
        cache.deleted_at = state.clock.now()
        return JSONResponse({})

    return delete


def _list(error: ErrorRenderer) -> Any:
    async def listing(request: Request) -> Response:
        state = state_of(request)
        await gate(request, PROVIDER, "cache.list", error)
        now = state.clock.now()
        alive = [_resource(c) for c in state.caches.values() if c.alive(now)]
        return JSONResponse({"cachedContents": alive} if alive else {})

    return listing


def caches_document(state: EmulatorState) -> dict[str, Any]:
    """``GET /_emulator/caches``: every cache created since the last reset, deleted and
    expired ones included, and how many requests named a cache the emulator did not have."""
    return {"caches": [c.to_json() for c in state.caches.values()], "refused": state.cache_refusals}


def _stamp(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat().replace("+00:00", "Z")


def routes(error: ErrorRenderer) -> list[Route]:
    """The ``cachedContents`` routes under ``/v1beta``, answering errors with ``error``."""
    return [
        Route("/v1beta/cachedContents", _create(error), methods=["POST"]),
        Route("/v1beta/cachedContents", _list(error), methods=["GET"]),
        Route("/v1beta/cachedContents/{id}", _get(error), methods=["GET"]),
        Route("/v1beta/cachedContents/{id}", _delete(error), methods=["DELETE"]),
    ]
