"""OpenRouter (``pip install -e '.[openai]'``): model ``openrouter/<vendor>/<model>``
(e.g. ``openrouter/openai/gpt-4o-mini``), live calls.

OpenRouter routes an OpenAI-shaped Chat Completions request to one of the providers that
serve the model. ``transport: sdk`` drives the official ``openai`` SDK pointed at
``https://openrouter.ai/api/v1`` (``OPENROUTER_BASE_URL`` or ``base_url:``), the lean
transport posts to ``<base>/chat/completions``; the key is ``OPENROUTER_API_KEY``. What
differs from OpenAI, handled here:

- every answer says what it cost (``usage.cost``, USD) and which provider served it
  (``provider``): the ledger takes that cost instead of pricing the tokens, and keeps the
  provider (:attr:`~agac.providers.base.Response.billed_usd`, ``served_by``);
- an action may pin the route with ``provider_options: {provider_order: "A,B",
  allow_fallbacks: "false"}``, sent as OpenRouter's ``provider`` object (part of the
  request's fingerprint: another route may answer differently);
- the limit goes as ``max_tokens``; reasoning comes as ``message.reasoning`` (kept out of
  the answer).

Batches go to OpenRouter's Batch API through the ``openai`` SDK's plain requests (it has
no batch client for it): one ``POST /batches`` body holding ``endpoint``, ``model`` (in
that order, before ``requests``: OpenRouter stream-parses it) and the inline ``requests``
(``{custom_id, body}``), at most 5,000 per batch (the engine splits above; one action, one
model). Results come inline with the ended batch and are read by ``custom_id``; each
answer's ``usage.cost`` and ``provider`` go into the ledger as live answers' do.
OpenRouter's batches carry no metadata: a submission whose answer was lost is looked for
among the batches created in its time window with its request count (B2), as for
Anthropic.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

from agac.errors import UnsupportedError
from agac.providers._attachments import Data, live_base64
from agac.providers._common import as_int, ended_or_raise, pick
from agac.providers._openai_compat import (
    REASONING_EFFORT,
    OpenAISdkProvider,
    batch_status,
)
from agac.providers.base import (
    TRANSPORTS,
    BatchHandle,
    BatchStatus,
    BilledWork,
    Request,
    Result,
    StoredRequests,
)
from agac.providers.options import TIMEOUT, Option, structured_output
from agac.providers.spec import BatchSpec, ProviderSpec

__all__ = ["OPENROUTER_BASE_URL", "OpenRouterProvider"]

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
"""OpenRouter's OpenAI-compatible endpoint."""

PROVIDER_ORDER = Option(
    "provider_order",
    "text",
    "the providers OpenRouter tries, in order, comma-separated (sent as `provider.order`; "
    "part of the request's fingerprint)",
)
ALLOW_FALLBACKS = Option(
    "allow_fallbacks",
    "choice",
    "whether OpenRouter may go past `provider_order` to other providers (sent as "
    "`provider.allow_fallbacks`)",
    choices=("true", "false"),
)


class OpenRouterProvider(OpenAISdkProvider):
    """OpenRouter Chat Completions (live); see the module docstring."""

    spec = ProviderSpec(
        name="openrouter",
        extra="openai",
        sdk_module="openai",
        credential_env=("OPENROUTER_API_KEY",),
        transports=TRANSPORTS,
        # At most 5,000 requests and 200 MB per batch; found again by time window.
        batch=BatchSpec(
            input="inline", max_requests=5000, max_bytes=200 * 1024 * 1024, find="window"
        ),
        cache_kinds=("implicit",),
        options=(
            TIMEOUT,
            structured_output("json_mode", "JSON mode with the schema in the prompt"),
        ),
        request_options=(REASONING_EFFORT, PROVIDER_ORDER, ALLOW_FALLBACKS),
    )
    base_url_env = "OPENROUTER_BASE_URL"
    default_base_url = OPENROUTER_BASE_URL
    chat_path = "/chat/completions"
    max_tokens_param = "max_tokens"
    line_routing = False

    def _chat_params(
        self, request: Request, *, native: bool, data: Data = live_base64
    ) -> dict[str, Any]:
        """OpenAI's body, with the route options folded into OpenRouter's ``provider``."""
        params = super()._chat_params(request, native=native, data=data)
        route: dict[str, Any] = {}
        order = params.pop(PROVIDER_ORDER.name, None)
        if order:
            route["order"] = [p.strip() for p in str(order).split(",") if p.strip()]
        fallbacks = params.pop(ALLOW_FALLBACKS.name, None)
        if fallbacks is not None:
            route["allow_fallbacks"] = str(fallbacks) == "true"
        if route:
            params["provider"] = route
        return params

    async def _sdk_chat(self, params: dict[str, Any], timeout: float | None) -> Any:
        # ``provider`` is not an argument of the openai SDK: it goes in the body as is.
        route = params.pop("provider", None)
        extra = {"extra_body": {"provider": route}} if route else {}
        return await super()._sdk_chat({**params, **extra}, timeout)

    # -- batch -------------------------------------------------------------------------

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        """One batch of the requests, inline in the create call (``endpoint`` and ``model``
        first); OpenRouter keeps no key of ours (found again by window, B2)."""
        lines = (
            self._stored_lines(requests.pairs, requests.cache)
            if isinstance(requests, StoredRequests)
            else self._batch_lines(requests)
        )
        inline = [_inline_request(line) for line in lines]
        model = str(inline[0]["body"].get("model") or "") if inline else ""
        body = {"endpoint": self._batch_endpoint, "model": model, "requests": inline}
        with self._translate_errors():
            batch = await self._client.post("/batches", cast_to=object, body=body)
        meta = {"request_count": len(inline), "created_at": as_int(pick(batch, "created_at"))}
        return BatchHandle(self.name, str(pick(batch, "id")), key, meta)

    async def _retrieve(self, batch_id: str) -> Any:
        return await self._client.get(f"/batches/{batch_id}", cast_to=object)

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        """The results inline in the ended batch, by ``custom_id`` (B7: none unless
        ``completed``)."""
        with self._translate_errors():
            batch = await self._retrieve(handle.id)
        ended_or_raise(handle, batch_status(batch))
        created = as_int(pick(batch, "created_at"))
        ended = as_int(pick(batch, "finalized_at")) or time.time()
        latency = max(0.0, (ended - created) * 1000.0) if created else 0.0
        for line in pick(batch, "results") or ():
            yield self._result(dict(line), latency)

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        with self._translate_errors():
            batch = await self._retrieve(handle.id)
        status = batch_status(batch)
        return BilledWork(status, status.completed)

    async def cancel_batch(self, handle: BatchHandle) -> None:
        with self._translate_errors():
            await self._client.post(f"/batches/{handle.id}/cancel", cast_to=object)

    async def find_batch(self, key: str) -> BatchHandle | None:
        """None: OpenRouter's batches carry no key (:meth:`batch_candidates` instead)."""
        return None

    async def batch_candidates(
        self,
        *,
        created_after: float | None,
        created_before: float | None = None,
        request_count: int | None = None,
    ) -> list[BatchHandle]:
        """Batches created in the window (newest first) with ``request_count`` requests."""
        if created_after is None:
            return []
        high = created_before if created_before is not None else float("inf")
        found: list[BatchHandle] = []
        with self._translate_errors():
            listed = await self._client.get("/batches", cast_to=object)
        for batch in pick(listed, "data") or ():
            created = as_int(pick(batch, "created_at"))
            status = batch_status(batch)
            if not created_after - 120 <= created <= high + 120:
                continue
            if request_count is not None and status.request_count != request_count:
                continue
            meta = {"request_count": status.request_count, "created_at": created}
            found.append(BatchHandle(self.name, str(pick(batch, "id")), "", meta))
        return found

    def _batch_status(self, batch: Any) -> BatchStatus:
        return batch_status(batch)


def _inline_request(line: bytes | list[Any]) -> dict[str, Any]:
    """A batch line as the inline request it is (attachments are not taken in batch:
    OpenRouter's batches take URLs only)."""
    if not isinstance(line, bytes):
        raise UnsupportedError(
            "openrouter: a batch request with attachments cannot be sent (OpenRouter's "
            "batches take files by URL only); run the action online"
        )
    request: dict[str, Any] = json.loads(line)
    return request
