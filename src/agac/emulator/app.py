"""The emulator's ASGI app: five providers' routes and the control API on one port.

Control API (``/_emulator/…``, never counted in the stats):

- ``POST /_emulator/faults`` ``{"rules": [RULE, …]}`` appends rules (:mod:`.faults`);
  ``GET`` lists them with their counters; ``DELETE`` clears them and releases batches
  stuck in cancelling.
- ``GET /_emulator/stats`` → ``{"requests": {provider: {op: n}}, "batches": [{"id",
  "provider", "requests", "status", "dropped"}], "answered": n, "duplicate_answers": n,
  "searches": {provider: n}}`` (``searches``: the web searches billed, :mod:`.search`);
  ``DELETE`` resets the counters.
- ``GET /_emulator/requests`` → ``{"requests": [{"provider", "op", "method", "path",
  "raw_path", "query", "headers", "body", "client"}, …]}``: the last 1,000 requests counted,
  oldest first (``path`` decoded, ``raw_path`` as it came on the wire, escapes kept), with
  lower-cased header names and the parsed body of live calls (``chat``; other ops have
  ``body: null``) and the client's ``host:port`` (one per connection); ``DELETE``
  forgets them. Stats resets and ``reset`` clear them too.
- ``GET /_emulator/context_caches`` → ``{"caches": [{"name", "model", "display_name", "tokens",
  "created_at", "expires_at", "deleted_at", "live", "batch"}, …], "refused": n}``: every
  Gemini context cache created since the last reset (deleted ones too), with how many
  live calls and batch items named it, and how many requests named one it did not have.
- ``POST /_emulator/clock`` ``{"advance": seconds}`` moves emulator time forward for every
  batch; ``{"hold": true}`` stops it following the wall clock until the next reset (it then
  moves only when advanced); ``GET`` reads it (``{"now", "offset", "held"}``).
- ``POST /_emulator/batches/{id}/advance`` ``{"seconds": s}`` moves one batch forward (by
  ``s``, or to the end of its run when the body is empty); ``id`` may be ``batches/…``.
- ``GET /_emulator/cache`` → ``{"entries": n}``: the prompt prefixes cached (every
  provider's, :mod:`.caching`); ``DELETE`` forgets them, so the next request of a prefix
  writes it again. The markers a request carried (``cache_control`` positions,
  ``prompt_cache_key``, ``cachedContent``) are in its ``/_emulator/requests`` entry, as
  ``cache``: a chat call's markers, or a batch's as ``[{"custom_id", …}]``.
- ``GET /_emulator/entra`` → ``{"token_seconds", "issued": [{"token", "expires_on"}, …]}``:
  the Entra ID tokens the managed-identity endpoint issued (:mod:`.entra`); ``POST``
  ``{"token_seconds": s}`` sets how long the next ones live.
- ``POST /_emulator/reset`` forgets everything (files, batches, faults, counters, the
  prompt cache, clock).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from . import (
    anthropic,
    azure,
    bedrock,
    deepseek,
    entra,
    fireworks,
    gcs,
    gemini,
    gemini_caches,
    groq,
    mistral,
    ollama,
    openai,
    openrouter,
    openrouter_batches,
    together,
    vertex,
    vllm,
    xai,
)
from .faults import RuleError
from .handling import SENT_PATH, SENT_RAW_PATH, DropConnection, Rejected, state_of
from .state import Config, EmulatorState

__all__ = ["create_app"]

_TRANSPORT = "agac.emulator.transport"


async def _faults_add(request: Request) -> Response:
    state = state_of(request)
    try:
        body = json.loads(await request.body() or b"{}")
        added = state.faults.add(body.get("rules") if isinstance(body, dict) else None)
    except (ValueError, RuleError) as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse({"added": len(added), "rules": len(state.faults.rules)})


async def _faults_list(request: Request) -> Response:
    return JSONResponse({"rules": [r.to_json() for r in state_of(request).faults.rules]})


async def _faults_clear(request: Request) -> Response:
    state_of(request).clear_faults()
    return JSONResponse({"rules": 0})


async def _stats(request: Request) -> Response:
    return JSONResponse(state_of(request).stats_document())


async def _stats_reset(request: Request) -> Response:
    state = state_of(request)
    state.stats.reset()
    state.journal.clear()
    return JSONResponse({"reset": True})


async def _requests(request: Request) -> Response:
    journal = state_of(request).journal
    if request.method == "DELETE":
        journal.clear()
        return JSONResponse({"requests": []})
    return JSONResponse({"requests": journal.document()})


async def _context_caches(request: Request) -> Response:
    return JSONResponse(gemini_caches.caches_document(state_of(request)))


async def _cache(request: Request) -> Response:
    cache = state_of(request).cache
    if request.method == "DELETE":
        cache.clear()
    return JSONResponse({"entries": len(cache.entries)})


async def _clock(request: Request) -> Response:
    state = state_of(request)
    if request.method == "POST":
        body = await _body(request)
        if body is not None and body.get("hold") is True:
            state.clock.hold()
        elif body is None or not isinstance(body.get("advance"), (int, float)):
            return JSONResponse(
                {"error": 'expected {"advance": seconds} or {"hold": true}'}, status_code=400
            )
        else:
            state.clock.advance(body["advance"])
    return JSONResponse(
        {
            "now": state.clock.now(),
            "offset": state.clock.offset,
            "held": state.clock.held_at is not None,
        }
    )


async def _entra(request: Request) -> Response:
    entra = state_of(request).entra
    if request.method == "POST":
        body = await _body(request)
        seconds = body.get("token_seconds") if body is not None else None
        if not isinstance(seconds, (int, float)) or seconds <= 0:
            return JSONResponse({"error": 'expected {"token_seconds": seconds}'}, status_code=400)
        entra.seconds = float(seconds)
    return JSONResponse(entra.document())


async def _batch_advance(request: Request) -> Response:
    state = state_of(request)
    batch_id = request.path_params["id"].removeprefix("batches/")
    batch = state.batches.get(batch_id)
    if batch is None:
        return JSONResponse({"error": f"no batch {batch_id}"}, status_code=404)
    body = await _body(request) or {}
    if isinstance(body.get("seconds"), (int, float)):
        batch.offset += max(0.0, float(body["seconds"]))
    else:
        now = state.clock.now()
        target = batch.duration
        if batch.cancel_elapsed is not None:
            target = batch.cancel_elapsed + batch.duration / 10
        batch.offset += max(0.0, target - batch.elapsed(now))
    phase = state.phase(batch)
    return JSONResponse({"id": batch_id, "phase": phase, "final": batch.final})


async def _models(request: Request) -> Response:
    """``POST /_emulator/models`` ``{"models": {id: {"lifecycle", "retires_at", …}}}``:
    what the Models API says of those models (merged into the table)."""
    body = await _body(request)
    models = (body or {}).get("models")
    lifecycles = {"active", "deprecated", "retired"}
    if not isinstance(models, dict) or not all(
        isinstance(v, dict) and v.get("lifecycle", "active") in lifecycles for v in models.values()
    ):
        return JSONResponse(
            {
                "error": 'expected {"models": {id: {"lifecycle": '
                'active|deprecated|retired, "retires_at": …}}}'
            },
            status_code=400,
        )
    state = state_of(request)
    state.models.update({str(k): dict(v) for k, v in models.items()})
    return JSONResponse({"models": len(state.models)})


async def _reset(request: Request) -> Response:
    state_of(request).reset()
    return JSONResponse({"reset": True})


async def _health(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def _body(request: Request) -> dict[str, Any] | None:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def _rejected(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Rejected)
    return exc.response


async def _drop(request: Request, exc: Exception) -> Response:
    """Abort the TCP connection: the client sees it closed without any response."""
    transport = request.scope.get(_TRANSPORT)
    if transport is None:
        raise RuntimeError("drop_connection needs a real server (uvicorn)") from exc
    transport.abort()
    # Let the server notice the loss, so it sends nothing (not even a 500).
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return Response(b"", status_code=599)


def _gemini_v1(scope: Scope) -> bool:
    """Is this a google-genai call under ``/v1`` (the SDK's default version since 3.x)?

    ``/v1/files`` and ``/v1/batches`` are OpenAI's paths too; google-genai always sends
    ``x-goog-api-client`` (and its key as ``x-goog-api-key`` or ``?key=``), OpenAI never.
    """
    path: str = scope["path"]
    if path.startswith("/upload/v1/"):
        return True
    if not path.startswith("/v1/"):
        return False
    if path.startswith("/v1/models/") and ":" in path:
        return True
    names = {name for name, _ in scope.get("headers", [])}
    return (
        b"x-goog-api-client" in names
        or b"x-goog-api-key" in names
        or b"key=" in scope.get("query_string", b"")
    )


class _Front:
    """Outermost ASGI layer.

    Exposes uvicorn's transport to handlers, for ``drop_connection`` (uvicorn's ``send``
    is a bound method of its request cycle, which holds the transport), and serves
    google-genai's ``/v1/…`` paths as the ``/v1beta/…`` ones.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[_TRANSPORT] = getattr(getattr(send, "__self__", None), "transport", None)
            if _gemini_v1(scope):
                path = scope["path"].replace("/v1/", "/v1beta/", 1)
                scope = {
                    **scope,
                    "path": path,
                    "raw_path": path.encode(),
                    SENT_PATH: scope["path"],
                    SENT_RAW_PATH: scope.get("raw_path"),
                }
        await self.app(scope, receive, send)


def create_app(config: Config | None = None, state: EmulatorState | None = None) -> ASGIApp:
    """Build the emulator app; pass ``state`` to share or inspect it in-process.

    The returned callable is plain ASGI; the Starlette app (with ``.state.emulator``) is
    reachable as its ``.app`` attribute.
    """
    state = state or EmulatorState(config)
    control = [
        Route("/_emulator/faults", _faults_add, methods=["POST"]),
        Route("/_emulator/faults", _faults_list, methods=["GET"]),
        Route("/_emulator/faults", _faults_clear, methods=["DELETE"]),
        Route("/_emulator/stats", _stats, methods=["GET"]),
        Route("/_emulator/stats", _stats_reset, methods=["DELETE"]),
        Route("/_emulator/requests", _requests, methods=["GET", "DELETE"]),
        Route("/_emulator/context_caches", _context_caches, methods=["GET"]),
        Route("/_emulator/cache", _cache, methods=["GET", "DELETE"]),
        Route("/_emulator/clock", _clock, methods=["GET", "POST"]),
        Route("/_emulator/batches/{id:path}/advance", _batch_advance, methods=["POST"]),
        Route("/_emulator/models", _models, methods=["POST"]),
        Route("/_emulator/entra", _entra, methods=["GET", "POST"]),
        Route("/_emulator/reset", _reset, methods=["POST"]),
        Route("/_emulator/health", _health, methods=["GET"]),
    ]
    app = Starlette(
        routes=[
            *control,
            *openai.routes(openai.OPENAI),
            *groq.routes(),
            *azure.routes(),
            *entra.routes(),
            *deepseek.routes(),
            *mistral.routes(),
            *together.routes(),
            *openrouter.routes(),
            *xai.routes(),
            *fireworks.routes(),
            *openrouter_batches.routes(),
            *anthropic.routes(),
            *gemini.routes(),
            *ollama.routes(),
            *bedrock.routes(),
            *vllm.routes(),
            *gcs.routes(),
            *vertex.routes(),
        ],
        exception_handlers={Rejected: _rejected, DropConnection: _drop},
    )
    app.state.emulator = state
    state.status_names.update(
        {
            "openai": openai.status_name,
            "groq": openai.status_name,
            "azure": openai.status_name,
            "anthropic": anthropic.status_name,
            "gemini": gemini.status_name,
            "bedrock": bedrock.status_name,
            "vertex": vertex.status_name,
        }
    )
    return _Front(app)
