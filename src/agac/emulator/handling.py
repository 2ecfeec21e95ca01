"""The steps every emulated request goes through before its provider module answers.

:func:`gate` counts the request, fires the fault rules, and acts on the faults that end
the exchange early: ``delay_ms`` (sleep), ``drop_connection`` (raise
:class:`DropConnection`; the app aborts the TCP connection), ``http`` and ``rate_limit``
(raise :class:`Rejected` carrying the provider's own error response). What remains —
answer and batch faults — is returned for the handler to apply.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .faults import Fired, Target
from .media import limit_error, redact_body, take_attachments, wire_error
from .state import Batch, BatchItem, ItemError

if TYPE_CHECKING:
    from .state import EmulatorState

__all__ = [
    "SENT_PATH",
    "SENT_RAW_PATH",
    "DropConnection",
    "ErrorRenderer",
    "Rejected",
    "attachments",
    "created",
    "gate",
    "live_latency",
    "new_batch",
    "note_cache",
    "observe",
    "read_json",
    "retry_headers",
    "state_of",
]

#: Scope key holding the path as the client sent it, when the app serves it under another
#: (google-genai's ``/v1/…`` served as ``/v1beta/…``).
SENT_PATH = "agac.emulator.sent_path"
#: The same, undecoded (the ``raw_path`` the client sent, percent escapes kept).
SENT_RAW_PATH = "agac.emulator.sent_raw_path"

#: Scope key holding the request's journal entry, for its handler to annotate.
_ENTRY = "agac.emulator.journal_entry"

#: Renders a provider error: (status, code, retry_after seconds, message) -> Response.
ErrorRenderer = Callable[[int, "str | None", "float | None", "str | None"], Response]


class DropConnection(Exception):
    """Raised by a handler to have the connection closed without an answer."""


class Rejected(Exception):
    """Raised by a handler to answer with ``response`` (a provider error) at once."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def state_of(request: Request) -> EmulatorState:
    """The emulator state of the app serving ``request``."""
    state: EmulatorState = request.app.state.emulator
    return state


async def read_json(request: Request, error: ErrorRenderer) -> Any:
    """Parse the request body as JSON or reject it with the provider's 400."""
    raw = await request.body()
    try:
        return json.loads(raw or b"{}")
    except ValueError as exc:
        raise Rejected(error(400, None, None, f"request body is not valid JSON: {exc}")) from exc


async def attachments(
    request: Request, provider: str, body: Any, error: ErrorRenderer, model: str = ""
) -> None:
    """Take the attachments out of a chat body (each replaced by its descriptor) and hold
    the request to the provider's limits: Rejected with its own error when over them."""
    wrong = wire_error(provider, body)
    if wrong is not None:
        raise Rejected(error(wrong[0], wrong[1], None, wrong[2]))
    seen = take_attachments(provider, body)
    if not seen:
        return
    over = limit_error(provider, seen, len(await request.body()), model)
    if over is not None:
        raise Rejected(error(over[0], over[1], None, over[2]))


async def gate(
    request: Request,
    provider: str,
    op: str,
    error: ErrorRenderer,
    target: Target | None = None,
    *,
    count: bool = True,
) -> Fired:
    """Count the request and apply the faults that fire for it (see module docstring)."""
    state = state_of(request)
    if count:
        state.stats.count(provider, op)
        # Starlette keeps the body it read: the handler has read a chat body already.
        body = await request.body() if op == "chat" else None
        if body is not None:
            body = redact_body(provider, body)  # the journal keeps no attachment bytes
        scope = request.scope
        host, port = scope.get("client") or ("", 0)
        raw_path = scope.get(SENT_RAW_PATH) or scope.get("raw_path") or b""
        scope[_ENTRY] = state.journal.add(
            provider,
            op,
            scope["method"],
            scope.get(SENT_PATH, scope["path"]),
            scope["query_string"].decode("latin-1"),
            scope["headers"],
            body,
            f"{host}:{port}",
            raw_path=raw_path.decode("latin-1"),
        )
    fired = state.faults.fire(provider, op, target or Target(), state.clock.now())
    if fired.delay_ms:
        await asyncio.sleep(fired.delay_ms / 1000)
    if fired.after_create:
        fired.lost = _outcome(fired, error)
        return fired  # the handler creates the batch, then raises ``lost`` (see created)
    raise_outcome = _outcome(fired, error)
    if raise_outcome is not None:
        raise raise_outcome
    return fired  # answer and batch faults are applied by the handler, which knows more.


def note_cache(request: Request, markers: Any) -> None:
    """Record in the request's journal entry the prompt-caching markers it carried
    (``cache``: a chat body's markers, or a batch's, item by item); none, nothing."""
    entry = request.scope.get(_ENTRY)
    if markers and entry is not None:
        entry["cache"] = markers


def _outcome(fired: Fired, error: ErrorRenderer) -> Exception | None:
    """The exception that ends the exchange early, if a fault says so."""
    if fired.drop_connection:
        return DropConnection()
    if fired.http is not None:
        fault = fired.http
        if "body" in fault:  # the provider's error body as it comes, sent as given
            return Rejected(
                JSONResponse(
                    fault["body"],
                    status_code=int(fault["http"]),
                    headers=dict(fault.get("headers") or {}),
                )
            )
        response = error(
            int(fault["http"]), fault.get("code"), fault.get("retry_after"), fault.get("message")
        )
        response.headers.update(dict(fault.get("headers") or {}))
        return Rejected(response)
    return None


def created(fired: Fired, response: Response) -> Response:
    """The answer to a ``batch.create`` whose batch now exists: ``response``, unless an
    ``after_create`` fault says the answer is lost (then its error or dropped connection)."""
    if fired.lost is not None:
        raise fired.lost
    return response


async def live_latency(request: Request) -> None:
    """Sleep the configured ``--latency-ms`` before a live answer."""
    latency = state_of(request).config.latency_ms
    if latency > 0:
        await asyncio.sleep(latency / 1000)


def retry_headers(retry_after: float | None, *, with_ms: bool) -> dict[str, str]:
    """``retry-after`` (seconds) and, where the provider sends it, ``retry-after-ms``."""
    if retry_after is None:
        return {}
    headers = {
        "retry-after": str(int(retry_after) if float(retry_after).is_integer() else retry_after)
    }
    if with_ms:
        headers["retry-after-ms"] = str(int(float(retry_after) * 1000))
    return headers


def new_batch(
    state: EmulatorState,
    fired: Fired,
    *,
    batch_id: str,
    provider: str,
    model: str,
    items: list[BatchItem],
    metadata: dict[str, Any] | None = None,
    info: dict[str, Any] | None = None,
) -> Batch:
    """Create and store a batch, applying the ``batch.create`` faults that fired for the
    call (``fired``) and, item by item, the rules that match a ``custom_id``."""
    now = state.clock.now()
    for item in items:
        target = Target(model=item.model, metadata=metadata, custom_id=item.custom_id)
        own = state.faults.fire(provider, "batch.create", target, now, item_level=True)
        if own.http is not None:
            status = int(own.http["http"])
            item.error = ItemError(
                status,
                own.http.get("code"),
                own.http.get("message") or f"injected error {status}",
                own.http.get("body"),
            )
        item.answer_fault = own.answer or fired.answer
        item.reply = own.reply or fired.reply
    batch = Batch(
        id=batch_id,
        provider=provider,
        model=model,
        created_at=now,
        duration=state.config.batch_seconds,
        items=items,
        metadata=dict(metadata or {}),
        info=dict(info or {}),
    )
    if fired.batch_end is not None:
        batch.end = fired.batch_end
        batch.answer_limit = min(fired.answered, len(items))
    batch.drop = min(fired.drop_records, len(items))
    return state.add_batch(batch)


def observe(state: EmulatorState, batch: Batch, fired: Fired) -> tuple[str, str | None]:
    """Apply ``batch.get``/``batch.cancel`` faults to ``batch``; return its phase now and
    the raw status a ``batch_status`` fault wants reported instead (or ``None``)."""
    if fired.stuck_cancelling:
        batch.stuck = True
    return state.phase(batch), fired.batch_status
