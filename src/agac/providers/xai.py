"""xAI (``pip install -e '.[openai]'``): model ``xai/<model>`` (e.g. ``xai/grok-3-mini``).

xAI serves OpenAI's Chat Completions at ``https://api.x.ai/v1`` and documents the
``openai`` SDK pointed there, so ``transport: sdk`` drives that SDK and the lean transport
posts to ``<base>/chat/completions``; the key is ``XAI_API_KEY``, the base URL
``XAI_BASE_URL`` or ``base_url:``. xAI's own ``xai-sdk`` speaks gRPC only: agac has no use
for a second SDK with a second wire protocol, and its batch calls are plain REST
(below), sent through the ``openai`` client's documented ``post``/``get``.

What differs from OpenAI, handled here:

- the limit goes as ``max_tokens``; finish reasons are OpenAI's
  (:mod:`agac.providers.stops`);
- a batch is a *named container that stays open*: agac creates it
  (``POST /batches {name}``), then adds its requests in chunks
  (``POST /batches/{id}/requests``, each request
  ``{batch_request_id, batch_request: {chat_get_completion: <chat body>}}``, at most
  ``add_chunk`` requests and 16 MB per call, under xAI's 25 MB);
- a batch has no status of its own, only counters (``num_requests``, ``num_pending``,
  ``num_success``, ``num_error``, ``num_cancelled``): agac decides it has *ended* when it
  holds requests and none is pending, is *cancelled* when that happens after a cancel,
  *failed* when xAI says why it cancelled it (``cancel_by_xai_message``), and *expired*
  when its ``expire_time`` has passed with requests still pending;
- results are read page by page (``GET /batches/{id}/results``, 100 a page,
  ``pagination_token``), each ``batch_result.response.chat_get_completion`` or an
  ``error`` carrying a gRPC status code;
- the batch is named after agac's batch key and its request count
  (``agac-<key>-<count>``): a submission whose answer was lost is found again by that
  name, and adopted only when every request reached it (else it is cancelled and sent
  again: a half-filled batch is never left running).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

from agac.errors import ProviderError
from agac.providers._common import as_int, ended_or_raise, pick, spool_jsonl
from agac.providers._errors import classify
from agac.providers._openai_compat import (
    COMPAT_OPTIONS,
    REASONING_EFFORT,
    OpenAISdkProvider,
    chat_response,
)
from agac.providers.base import (
    TRANSPORTS,
    BatchHandle,
    BatchState,
    BatchStatus,
    BilledWork,
    Request,
    Result,
    StoredRequests,
)
from agac.providers.options import Option
from agac.providers.spec import BatchSpec, ProviderSpec

__all__ = ["XAI_BASE_URL", "XaiProvider", "batch_name", "xai_status"]

XAI_BASE_URL = "https://api.x.ai/v1"
"""xAI's OpenAI-compatible endpoint."""

#: Bytes of one add call's body at most (xAI takes 25 MB).
ADD_MAX_BYTES = 16 * 1024 * 1024
#: Results asked for per page (xAI's most).
PAGE_SIZE = 100

ADD_CHUNK = Option(
    "add_chunk",
    "integer",
    "requests per call that adds a batch's requests to it (a call also stays under 16 MB)",
    default=1000,
    minimum=1,
)

#: gRPC status codes of a result's ``error``, as the HTTP status agac classifies.
_GRPC_HTTP = {
    3: 400,  # INVALID_ARGUMENT
    4: 504,  # DEADLINE_EXCEEDED
    5: 404,  # NOT_FOUND
    7: 403,  # PERMISSION_DENIED
    8: 429,  # RESOURCE_EXHAUSTED
    9: 400,  # FAILED_PRECONDITION
    11: 400,  # OUT_OF_RANGE
    13: 500,  # INTERNAL
    14: 503,  # UNAVAILABLE
    16: 401,  # UNAUTHENTICATED
}
_CANCELLED = 1  # gRPC CANCELLED: the request was cut by a cancel, never run
_NAME = re.compile(r"^agac-(?P<key>.+)-(?P<count>\d+)$")


def batch_name(key: str, count: int) -> str:
    """The name batch ``key`` of ``count`` requests is created under (found again by it)."""
    return f"agac-{re.sub(r'[^A-Za-z0-9._:-]', '_', key)}-{count}"


def xai_status(batch: Any, now: float) -> BatchStatus:
    """What agac makes of an xAI batch's counters at time ``now`` (see the module
    docstring); the raw status says the counters, as xAI has no word of its own."""
    counts = pick(batch, "state") or {}
    total = as_int(pick(counts, "num_requests"))
    pending = as_int(pick(counts, "num_pending"))
    success = as_int(pick(counts, "num_success"))
    error = as_int(pick(counts, "num_error"))
    raw = f"{pending} of {total} pending"
    state: BatchState
    if pick(batch, "cancel_by_xai_message"):
        state = "failed"
        raw = f"cancelled by xAI: {pick(batch, 'cancel_by_xai_message')}"
    elif total and not pending:
        state = "cancelled" if pick(batch, "cancel_time") else "ended"
    elif pick(batch, "cancel_time"):
        state = "cancelling"
    elif _passed(pick(batch, "expire_time"), now):
        state = "expired"
    else:
        state = "running"
    return BatchStatus(
        state=state,
        raw_status=raw,
        request_count=total,
        completed=success,
        failed=error,
    )


def _passed(stamp: Any, now: float) -> bool:
    """Whether an RFC 3339 time (xAI's ``expire_time``) is at or before ``now``."""
    when = _epoch(stamp)
    return bool(when) and when <= now


class XaiProvider(OpenAISdkProvider):
    """xAI Chat Completions and its open-ended Batch API; see the module docstring."""

    #: Text only here; xAI caches prompt prefixes by itself. A batch has no request cap
    #: (xAI may slow one past 100,000): agac splits at 100,000 requests or 1 GB.
    spec = ProviderSpec(
        name="xai",
        extra="openai",
        sdk_module="openai",
        credential_env=("XAI_API_KEY",),
        transports=TRANSPORTS,
        batch=BatchSpec(input="inline", max_requests=100_000, max_bytes=1024 * 1024 * 1024),
        cache_kinds=("implicit",),
        options=(*COMPAT_OPTIONS, ADD_CHUNK),
        request_options=(REASONING_EFFORT,),
    )
    base_url_env = "XAI_BASE_URL"
    default_base_url = XAI_BASE_URL
    chat_path = "/chat/completions"
    max_tokens_param = "max_tokens"
    line_routing = False

    @property
    def _add_chunk(self) -> int:
        return int(self.settings.options.get("add_chunk") or 1000)

    async def _post(self, path: str, body: Any) -> Any:
        return await self._client.post(path, body=body, cast_to=object)

    async def _get(self, path: str, query: dict[str, Any] | None = None) -> Any:
        return await self._client.get(path, cast_to=object, options={"params": query or {}})

    # -- batch ---------------------------------------------------------------

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        """Create the batch named after ``key``, then add its requests in chunks; a
        batch whose requests could not all be added is cancelled (never left half
        full) and the error raised."""
        lines = (
            self._stored_lines(requests.pairs, requests.cache)
            if isinstance(requests, StoredRequests)
            else self._batch_lines(requests)
        )
        spooled = spool_jsonl(
            lines,
            max_count=self._batch_limits[0],
            max_bytes=self._batch_limits[1],
            provider=self.name,
        )
        try:
            with self._translate_errors():
                created = await self._post("/batches", {"name": batch_name(key, spooled.count)})
            batch_id = str(pick(created, "batch_id"))
            await self._fill(batch_id, spooled.path)
        finally:
            spooled.discard()
        return BatchHandle(self.name, batch_id, key, {"request_count": spooled.count})

    async def _fill(self, batch_id: str, path: Path) -> None:
        try:
            with self._translate_errors():
                for chunk in _chunks(path, self._add_chunk):
                    await self._post(f"/batches/{batch_id}/requests", {"batch_requests": chunk})
        except BaseException:
            await self._cancel_quietly(batch_id)
            raise

    async def _cancel_quietly(self, batch_id: str) -> None:
        try:
            with self._translate_errors():
                await self._post(f"/batches/{batch_id}:cancel", {})
        except ProviderError:
            pass  # the batch's requests were not all added: its results are never read

    async def _retrieve(self, batch_id: str) -> Any:
        return await self._get(f"/batches/{batch_id}")

    def _batch_status(self, batch: Any) -> BatchStatus:
        return xai_status(batch, time.time())

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        """Every result, page by page; nothing from a batch that has not ended (B7)."""
        with self._translate_errors():
            batch = await self._retrieve(handle.id)
        ended_or_raise(handle, self._batch_status(batch))
        created = _epoch(pick(batch, "create_time"))
        latency = max(0.0, (time.time() - created) * 1000.0) if created else 0.0
        token: str | None = None
        while True:
            query: dict[str, Any] = {"limit": PAGE_SIZE}
            if token:
                query["pagination_token"] = token
            with self._translate_errors():
                page = await self._get(f"/batches/{handle.id}/results", query)
            for entry in pick(page, "results") or ():
                yield self._xai_result(entry, latency)
            token = pick(page, "pagination_token") or None
            if not token:
                return

    def _xai_result(self, entry: dict[str, Any], latency_ms: float) -> Result:
        custom_id = str(entry.get("batch_request_id"))
        outcome = entry.get("batch_result") or {}
        completion = pick(outcome, "response", "chat_get_completion")
        if completion is not None:
            answer = chat_response(
                completion,
                provider=self.name,
                wire=True,
                latency_ms=latency_ms,
                service_tier="batch",
            )
            return Result(custom_id, "succeeded", response=answer)
        error = outcome.get("error") or entry.get("error") or {}
        code = as_int(pick(error, "code"))
        if code == _CANCELLED:
            return Result(custom_id, "canceled")
        message = str(pick(error, "message") or "the request failed")
        err = classify(self.name, _GRPC_HTTP.get(code, 500), message=message, code=str(code))
        return Result(custom_id, "errored", error=err)

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        """The requests the batch answered (``num_success``); xAI reports no token totals
        for a batch (agac estimates them)."""
        with self._translate_errors():
            batch = await self._retrieve(handle.id)
        status = self._batch_status(batch)
        return BilledWork(status, status.completed)

    async def cancel_batch(self, handle: BatchHandle) -> None:
        with self._translate_errors():
            await self._post(f"/batches/{handle.id}:cancel", {})

    async def find_batch(self, key: str) -> BatchHandle | None:
        """The newest batch named after ``key`` that holds all its requests (scanning at
        most ``find_batch_scan`` batches); one found short of them is cancelled and not
        adopted, so the requests are sent again in a new batch."""
        seen = 0
        with self._translate_errors():
            async for batch in self._list_batches():
                found = _NAME.match(str(pick(batch, "name") or ""))
                wanted = batch_name(key, int(found["count"])) if found else None
                if found and pick(batch, "name") == wanted and not pick(batch, "cancel_time"):
                    count = int(found["count"])
                    batch_id = str(pick(batch, "batch_id"))
                    if as_int(pick(batch, "state", "num_requests")) >= count:
                        return BatchHandle(self.name, batch_id, key, {"request_count": count})
                    await self._cancel_quietly(batch_id)
                    return None
                seen += 1
                if seen >= self._scan_limit:
                    break
        return None

    async def _list_batches(self) -> AsyncIterator[Any]:
        token: str | None = None
        while True:
            query: dict[str, Any] = {"limit": PAGE_SIZE}
            if token:
                query["pagination_token"] = token
            page = await self._get("/batches", query)
            for batch in pick(page, "batches") or ():
                yield batch
            token = pick(page, "pagination_token") or None
            if not token:
                return


def _chunks(path: Path, size: int) -> Iterator[list[dict[str, Any]]]:
    """The spooled ``{custom_id, body}`` lines as xAI batch requests, ``size`` (and at
    most :data:`ADD_MAX_BYTES`) to a chunk."""
    chunk: list[dict[str, Any]] = []
    used = 0
    with path.open("rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            if chunk and (len(chunk) >= size or used + len(line) > ADD_MAX_BYTES):
                yield chunk
                chunk, used = [], 0
            chunk.append(
                {
                    "batch_request_id": row["custom_id"],
                    "batch_request": {"chat_get_completion": row["body"]},
                }
            )
            used += len(line)
    if chunk:
        yield chunk


def _epoch(stamp: Any) -> float:
    """An RFC 3339 time as epoch seconds; 0 for none."""
    if not stamp:
        return 0.0
    try:
        when = dt.datetime.fromisoformat(str(stamp))
    except ValueError:
        return 0.0
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()
