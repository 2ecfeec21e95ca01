"""The adapter logic shared by OpenAI and Groq, whose Chat Completions and Batch APIs
have the same shape (Groq serves a near-clone under ``/openai/v1``).

A subclass names its SDK and builds its async client; listing batches is the only
wire difference the adapters see (OpenAI pages with ``after``, Groq with
``paging.next_cursor``).

Batch input is written line by line to a temporary JSONL file and uploaded with
``purpose=batch``; the batch carries our idempotency key as ``metadata.agac_key`` so
that :meth:`find_batch` can recover a submission whose answer was lost (B2).
Results are read by streaming the output and error files line by line.
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from agac.errors import FatalError, ProviderError
from agac.jsontext import dumps
from agac.media import AttachmentLimits
from agac.providers._attachments import Blobs, Data, live_base64, openai_parts
from agac.providers._batch_endpoint import batch_endpoint, one_endpoint
from agac.providers._chat_response import chat_response
from agac.providers._common import (
    SCHEMA_NAME,
    as_int,
    dump_line,
    ended_or_raise,
    fallback_system,
    pick,
    require_custom_id,
    spool_jsonl,
    stopwatch,
    strict_compatible,
)
from agac.providers._content_filter import filter_detail
from agac.providers._errors import (
    classify,
    connection_error,
    error_fields,
    request_id_of,
    retry_after_seconds,
)
from agac.providers._responses_wire import (
    RESPONSES_ENDPOINT,
    is_response_object,
    read_response,
    responses_body,
)
from agac.providers._search_wire import (
    openai_web_search_options,
)
from agac.providers._tool_wire import chat_tool_message
from agac.providers.adapter import ProviderBase
from agac.providers.base import (
    TRANSPORTS,
    Attachment,
    BatchHandle,
    BatchState,
    BatchStatus,
    BilledWork,
    CacheHint,
    Message,
    ProviderSettings,
    Request,
    Response,
    Result,
    StoredRequests,
    Usage,
    stored_request,
)
from agac.providers.encoded import EncodedCall
from agac.providers.options import FIND_BATCH_SCAN, TIMEOUT, Option, structured_output
from agac.providers.spec import BatchSpec, CacheKind, FlexSpec, ProviderSpec, WebSearchSpec

__all__ = ["OpenAICompatProvider", "chat_response", "filter_detail"]

_MESSAGES = '"messages":['
_NATIVE, _JSON_MODE = "json_schema", "json_mode"
"""How a live body asks for a schema (an :class:`EncodedCall`'s form)."""
_ATTACHMENTS = '"attachments":['
_WEB_SEARCH = '"web_search":'

#: ``dump_line``'s encoder (compact, UTF-8 as is), for values that are not objects.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

# OpenAI and Groq use the same eight batch statuses (two Ls in "cancelled").
BATCH_STATES: dict[str, BatchState] = {
    "validating": "running",
    "in_progress": "running",
    "finalizing": "running",
    "cancelling": "cancelling",
    "completed": "ended",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}

# Error-file codes for requests that never ran.
_EXPIRED_CODES = frozenset({"batch_expired"})
_CANCELLED_CODES = frozenset({"batch_cancelled", "batch_canceled"})
# A 400 whose message names these is a model that cannot take a json_schema.
_SCHEMA_REJECTED = re.compile(
    r"response_format|text\.format|json_schema|structured output", re.IGNORECASE
)

#: ``providers: openai:`` / ``azure:`` / ``groq:`` in agac.yml.
COMPAT_OPTIONS = (
    TIMEOUT,
    structured_output("json_mode", "JSON mode with the schema in the prompt"),
    FIND_BATCH_SCAN,
)

#: OpenAI's batch limits: a JSONL file of 50,000 requests and 200 MB.
FILE_BATCH = BatchSpec(input="file", tools=True)

#: An action's ``provider_options:`` on Chat Completions APIs.
REASONING_EFFORT = Option(
    "reasoning_effort",
    "choice",
    "how much a reasoning model thinks before it answers (sent as `reasoning_effort`; "
    "part of the request's fingerprint)",
    choices=("minimal", "low", "medium", "high"),
)


def compat_spec(
    name: str,
    *,
    extra: str,
    sdk_module: str,
    credential_env: tuple[str, ...],
    attachments: AttachmentLimits,
    ambient_credentials: str | None = None,
    cache_kinds: tuple[CacheKind, ...],
    cache_minimum: Callable[[str], int] | None = None,
    flex: FlexSpec | None = None,
    options: tuple[Option, ...] = COMPAT_OPTIONS,
    batch: BatchSpec = FILE_BATCH,
    web_search: WebSearchSpec | None = None,
) -> ProviderSpec:
    """The spec of a Chat Completions provider with an OpenAI-shaped Batch API (a JSONL
    file upload, found again by ``metadata.agac_key``)."""
    return ProviderSpec(
        name=name,
        extra=extra,
        sdk_module=sdk_module,
        credential_env=credential_env,
        ambient_credentials=ambient_credentials,
        transports=TRANSPORTS,
        batch=batch,
        flex=flex,
        cache_kinds=cache_kinds,
        cache_minimum=cache_minimum,
        attachments=attachments,
        vision=True,
        options=options,
        request_options=(REASONING_EFFORT,),
        function_tools=True,
        web_search=web_search,
    )


class OpenAICompatProvider(ProviderBase):
    """Base of the OpenAI, Azure and Groq adapters; see the module docstring. A subclass
    declares its ``spec`` (:func:`compat_spec`)."""

    #: Where the lean transport sends live calls: the base URL (the SDK's default when
    #: none is configured) followed by the chat path.
    default_base_url: ClassVar[str]
    chat_path: ClassVar[str]
    max_tokens_param: ClassVar[str] = "max_completion_tokens"
    batch_endpoint: ClassVar[str] = "/v1/chat/completions"
    completion_window: ClassVar[str] = "24h"
    #: Whether a cache hint's key goes as ``prompt_cache_key`` (OpenAI's routing key for
    #: prompt caching; an API without one leaves it out).
    prompt_cache_key: ClassVar[bool] = False
    #: Whether a batch line names its ``method`` and ``url`` (OpenAI's lines); Mistral's
    #: and Together's are ``{custom_id, body}`` only (the endpoint is the batch's).
    line_routing: ClassVar[bool] = True
    #: Whether each call offering web search is one billed search (OpenAI's search
    #: models); otherwise the answer says what ran (Groq's ``executed_tools``).
    search_per_call: ClassVar[bool] = True
    #: Where the API's Responses endpoint is under the base URL (None: it has none);
    #: :meth:`_via_responses` says which requests go there.
    responses_path: ClassVar[str | None] = None

    def __init__(self, settings: ProviderSettings) -> None:
        super().__init__(settings)
        # Models seen to reject json_schema: later calls go straight to JSON mode.
        self._no_schema: set[str] = set()
        self._force_json_mode = settings.options.get("structured_output") == "json_mode"
        self._scan_limit = int(settings.options.get("find_batch_scan", 2000))
        self._batch_endpoint = self.batch_endpoint
        batch = self.spec.batch
        self._batch_limits = (
            (batch.max_requests, batch.max_bytes) if batch else (50_000, 200 * 1024 * 1024)
        )

    def _open_lean(self) -> None:
        root = (self._base_url or self.default_base_url).rstrip("/")
        self._chat_url = root + self.chat_path
        self._responses_url = root + (self.responses_path or "/responses")

    def _make_client(self) -> Any:
        raise NotImplementedError

    def _lean_headers(self) -> dict[str, str]:
        """The headers the SDK authenticates with (lean transport)."""
        return {"Authorization": f"Bearer {self._api_key}"}

    def _list_batches(self) -> AsyncIterator[Any]:
        """Every batch the key can see, newest first."""
        raise NotImplementedError

    def _via_responses(self, request: Request) -> bool:
        """Whether ``request`` goes to the Responses API rather than Chat Completions
        (OpenAI's web search beside any model but a Chat Completions search model)."""
        return False

    def _line_endpoint(self, request: Request) -> str:
        """The Batch API endpoint (a batch line's ``url``) of ``request``."""
        return RESPONSES_ENDPOINT if self._via_responses(request) else self._batch_endpoint

    def _chat_target(self, model: str) -> str:
        """Where the lean transport posts a chat completion for ``model``."""
        return self._chat_url

    async def _call_headers(self) -> dict[str, str] | None:
        """Headers of one lean call beyond the session's (a fresh token), or None."""
        return None

    # -- errors --------------------------------------------------------------

    def _status_error(
        self, status: int, headers: Mapping[str, str], body: Any, text: str
    ) -> ProviderError:
        """The taxonomy error for a non-2xx answer, on either transport.

        ``body`` is the error body (the openai SDK unwraps ``{"error": …}``, the groq SDK
        does not; both forms are read); ``text`` is the fallback message.
        """
        code, kind, message, param = error_fields(body)
        if kind == "insufficient_quota" and code is None:
            code = kind
        return classify(
            self.name,
            status,
            message=message or text,
            retry_after=retry_after_seconds(headers),
            code=code,
            kind=kind,
            param=param,
            request_id=request_id_of(headers, body),
        )

    def _sdk_error(self, exc: Exception) -> ProviderError | None:
        sdk = self._sdk
        if isinstance(exc, sdk.APIStatusError):
            return self._status_error(exc.status_code, exc.response.headers, exc.body, exc.message)
        if isinstance(exc, sdk.APIConnectionError):  # includes APITimeoutError
            return connection_error(self.name, exc)
        return None

    # -- online --------------------------------------------------------------

    def _chat_params(
        self, request: Request, *, native: bool, data: Data = live_base64
    ) -> dict[str, Any]:
        """The Chat Completions body for a request, live or in a batch line; ``data``
        gives each attachment's base64 (read now, or a batch line's placeholder)."""
        messages = [
            {"role": m.role, "content": m.content}
            if not (m.attachments or m.tool_calls or m.tool_call_id)
            else chat_tool_message(m)
            if not m.attachments
            else {"role": m.role, "content": self._content_parts(m, data)}
            for m in request.messages
        ]
        params: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            self.max_tokens_param: request.max_tokens,
        }
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.seed is not None:
            params["seed"] = request.seed
        if request.schema is not None:
            if native:
                params["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": SCHEMA_NAME,
                        "schema": request.schema,
                        "strict": strict_compatible(request.schema),
                    },
                }
            else:
                system = {"role": "system", "content": fallback_system(request)}
                params["messages"] = [system] + [m for m in messages if m["role"] != "system"]
                params["response_format"] = {"type": "json_object"}
        for option, value in request.options:
            params[option] = value
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        if request.web_search is not None:
            self._offer_web_search(request, params)
        if request.tier == "flex":
            params["service_tier"] = "flex"
        params.update(self._reasoning_params(request.model))
        key = request.cache.key if request.cache is not None else None
        if key and self.prompt_cache_key:
            params["prompt_cache_key"] = key
        return params

    def _offer_web_search(self, request: Request, params: dict[str, Any]) -> None:
        """Add the request's web search to ``params``: a search model's
        ``web_search_options`` here (a subclass whose API searches otherwise says so)."""
        assert request.web_search is not None
        params["web_search_options"] = openai_web_search_options(request.web_search)

    def _content_parts(self, m: Message, data: Data) -> list[dict[str, Any]]:
        """A user turn with attachments as content parts: OpenAI's ``image_url`` and
        ``file`` parts here (a subclass whose API names them otherwise says so)."""
        return openai_parts(m.content, m.attachments, m.position, data)

    def _reasoning_params(self, model: str) -> dict[str, Any]:
        """What asks ``model`` for its reasoning apart from the answer; none here (a
        subclass whose API can adds it). It changes how the reasoning travels, not the
        answer, so it stays out of the fingerprint (:mod:`agac.providers._reasoning`)."""
        return {}

    def _native_schema(self, model: str) -> bool:
        return not self._force_json_mode and model not in self._no_schema

    async def complete(self, request: Request) -> Response:
        """One live chat completion. A model that rejects ``json_schema`` (a 400
        naming it) is asked again once in JSON mode, and remembered."""
        return await self._complete(request, None)

    def encode_call(self, request: Request) -> EncodedCall | None:
        """The lean transport's Chat Completions body of a live call, encoded ahead of its
        send (None: the SDK transport, a request with attachments, read at the send, or one
        that goes to the Responses API)."""
        if self._http is None or request.attachments or self._via_responses(request):
            return None
        native = self._native_schema(request.model)
        body = dumps(self._chat_params(request, native=native)).encode()
        return EncodedCall(body, _NATIVE if native else _JSON_MODE)

    async def complete_encoded(self, request: Request, encoded: EncodedCall) -> Response:
        """:meth:`complete` sending ``encoded`` (encoded again when the model was found
        to reject ``json_schema`` since)."""
        return await self._complete(request, encoded)

    async def _complete(self, request: Request, encoded: EncodedCall | None) -> Response:
        native = self._native_schema(request.model)
        if encoded is not None and encoded.form != (_NATIVE if native else _JSON_MODE):
            encoded = None
        try:
            return await self._chat(request, native=native, encoded=encoded)
        except FatalError as err:
            if not (request.schema is not None and native and _schema_rejected(err)):
                raise
            self._no_schema.add(request.model)
            return await self._chat(request, native=False)

    async def _chat(
        self, request: Request, *, native: bool, encoded: EncodedCall | None = None
    ) -> Response:
        if self._via_responses(request):
            return await self._respond(request, native=native)
        parse = request.schema is not None
        if self._http is not None:
            data = (
                encoded.body
                if encoded is not None
                else dumps(self._chat_params(request, native=native)).encode()
            )
            body, headers, ms = await self._lean_post(
                self._chat_target(request.model), data, request
            )
            return chat_response(
                body,
                provider=self.name,
                latency_ms=ms,
                parse=parse,
                request_id=request_id_of(headers),
                offered=_offered(request),
                searched=self.search_per_call and request.web_search is not None,
            )
        params = self._chat_params(request, native=native)
        with self._translate_errors(), stopwatch() as took:
            completion, answered = await self._sdk_chat(params, request.timeout)
        return chat_response(
            completion,
            provider=self.name,
            latency_ms=took[0],
            parse=parse,
            request_id=request_id_of(answered) if answered is not None else None,
            offered=_offered(request),
            searched=self.search_per_call and request.web_search is not None,
        )

    async def _lean_post(
        self, url: str, data: bytes, request: Request
    ) -> tuple[Any, Mapping[str, str], float]:
        """A live call's encoded body POSTed on the lean transport: the answer, its
        headers and the milliseconds it took."""
        assert self._http is not None
        with stopwatch() as took:
            body, headers = await self._http.post_encoded(
                url,
                data,
                errors=self._status_error,
                timeout=request.timeout,
                headers=await self._call_headers(),
            )
        return body, headers, took[0]

    def _responses_params(
        self, request: Request, *, native: bool, data: Data = live_base64
    ) -> dict[str, Any]:
        """The Responses body of a request, live or in a batch line
        (:mod:`agac.providers._responses_wire`), with its cache routing key."""
        fallback = fallback_system(request) if request.schema is not None else None
        body = responses_body(request, native=native, fallback=fallback, data=data)
        key = request.cache.key if request.cache is not None else None
        if key and self.prompt_cache_key:
            body["prompt_cache_key"] = key
        return body

    async def _respond(self, request: Request, *, native: bool) -> Response:
        """One live call of the Responses API, on either transport."""
        params = self._responses_params(request, native=native)
        parse = request.schema is not None
        if self._http is not None:
            body, headers, ms = await self._lean_post(
                self._responses_url, dumps(params).encode(), request
            )
            return read_response(
                body,
                provider=self.name,
                latency_ms=ms,
                parse=parse,
                request_id=request_id_of(headers),
                offered=_offered(request),
            )
        with self._translate_errors(), stopwatch() as took:
            raw = await self._client.responses.with_raw_response.create(
                **params,
                timeout=request.timeout if request.timeout is not None else self._sdk.NOT_GIVEN,
            )
            answer = raw.parse()
        return read_response(
            answer,
            provider=self.name,
            latency_ms=took[0],
            parse=parse,
            request_id=request_id_of(raw.headers),
            offered=_offered(request),
        )

    async def _sdk_chat(
        self, params: dict[str, Any], timeout: float | None
    ) -> tuple[Any, Mapping[str, str] | None]:
        """One chat completion through the SDK: the completion and the answer's headers
        (None when the SDK does not give them)."""
        # The raw response for its headers: the request id (groq's models lack openai's
        # ``_request_id``).
        raw = await self._client.chat.completions.with_raw_response.create(
            **params, timeout=timeout if timeout is not None else self._sdk.NOT_GIVEN
        )
        completion = raw.parse()  # openai: a legacy response, parsed at once
        if inspect.isawaitable(completion):  # groq: an async response
            completion = await completion
        return completion, raw.headers

    # -- batch ---------------------------------------------------------------

    def _batch_line(self, request: Request, data: Data = live_base64) -> dict[str, Any]:
        native = self._native_schema(request.model)
        if self._via_responses(request):
            body = self._responses_params(request, native=native, data=data)
            return {
                "custom_id": require_custom_id(request),
                "method": "POST",
                "url": RESPONSES_ENDPOINT,
                "body": body,
            }
        body = self._chat_params(request, native=native, data=data)
        if not self.line_routing:
            return {"custom_id": require_custom_id(request), "body": body}
        return {
            "custom_id": require_custom_id(request),
            "method": "POST",
            "url": self._batch_endpoint,
            "body": body,
        }

    def _line_head(self) -> bytes:
        """What follows a batch line's ``custom_id`` up to the body's model value."""
        if not self.line_routing:
            return b',"body":{"model":'
        return (
            b',"method":"POST","url":'
            + _encode(self._batch_endpoint).encode()
            + b',"body":{"model":'
        )

    def _attachment_line(self, request: Request) -> list[bytes | Attachment]:
        """A batch line whose attachments' base64 is streamed in from their files."""
        blobs = Blobs()
        return blobs.pieces(dump_line(self._batch_line(request, blobs.token)))

    def _batch_lines(
        self, requests: Iterable[Request]
    ) -> Iterator[bytes | list[bytes | Attachment]]:
        """The batch's JSONL lines, byte for byte ``dump_line(self._batch_line(r))``, with
        the part of the body after the messages (limits, schema) encoded once for each
        run of requests that share it — in a batch of one action, usually all of them.
        Requests sent in JSON mode (their messages change with the schema) take the
        general path."""
        head = self._line_head()
        shared, tail = "", b""
        for r in requests:
            if any(m.attachments for m in r.messages):
                yield self._attachment_line(r)
                continue
            if self._via_responses(r):
                yield dump_line(self._batch_line(r))
                continue
            if r.schema is not None and not self._native_schema(r.model):
                yield dump_line(self._batch_line(r))
                continue
            same = _encode(
                [
                    r.model,
                    r.max_tokens,
                    r.temperature,
                    r.seed,
                    r.schema,
                    r.cache.key if r.cache is not None else None,
                    r.options,
                ]
            )
            if same != shared:
                rest = self._chat_params(r, native=True)
                del rest["model"], rest["messages"]
                shared, tail = same, b"," + _encode(rest).encode()[1:] + b"}"
            messages = [{"role": m.role, "content": m.content} for m in r.messages]
            yield b"".join(
                (
                    b'{"custom_id":',
                    _encode(require_custom_id(r)).encode(),
                    head,
                    _encode(r.model).encode(),
                    b',"messages":',
                    _encode(messages).encode(),
                    tail,
                )
            )

    def _stored_lines(
        self, items: Iterable[tuple[str, str]], cache: CacheHint | None = None
    ) -> Iterator[bytes | list[bytes | Attachment]]:
        """Batch lines straight from stored canonical requests (``Request.canonical()``,
        keys sorted): the messages array is copied as stored, and what surrounds it
        (model, limits, schema) is decoded and encoded once for each distinct text. The
        lines equal :meth:`_batch_lines`' as JSON (a message's keys come in the stored
        order); a request sent in JSON mode, one with attachments, or text not in the
        canonical form, goes through a decoded :class:`Request`. Every request carries
        ``cache``, the batch's cache hint."""
        head = self._line_head()
        bodies: dict[str, tuple[bytes, bytes] | None] = {}
        for custom_id, text in items:
            if _ATTACHMENTS in text:
                yield self._attachment_line(stored_request(text, custom_id, cache))
                continue
            if _WEB_SEARCH in text:  # perhaps a Responses request: decoded to tell
                yield from self._batch_lines([stored_request(text, custom_id, cache)])
                continue
            start = text.find(_MESSAGES) if text.startswith('{"max_tokens":') else -1
            end = text.find('],"model":"', start) if start >= 0 else -1
            rest = text[:start] + text[end + 1 :] if end >= 0 else ""
            body = bodies.get(rest) if rest else None
            if rest and rest not in bodies:
                r = stored_request(text, custom_id, cache)
                body = None
                if r.schema is None or self._native_schema(r.model):
                    tail = self._chat_params(r, native=True)
                    del tail["model"], tail["messages"]
                    body = (_encode(r.model).encode(), b"," + _encode(tail).encode()[1:] + b"}")
                bodies[rest] = body
            if body is None:
                yield from self._batch_lines([stored_request(text, custom_id, cache)])
                continue
            yield b"".join(
                (
                    b'{"custom_id":',
                    _encode(custom_id).encode(),
                    head,
                    body[0],
                    b',"messages":',
                    text[start + len(_MESSAGES) - 1 : end + 1].encode(),
                    body[1],
                )
            )

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        """Upload the requests as a JSONL file and create a batch tagged with ``key``;
        requests as stored (:class:`StoredRequests`) are written from their stored text."""
        endpoint, requests = batch_endpoint(requests, self._line_endpoint, self._batch_endpoint)
        lines = (
            self._stored_lines(requests.pairs, requests.cache)
            if isinstance(requests, StoredRequests)
            else self._batch_lines(requests)
        )
        spooled = spool_jsonl(
            one_endpoint(lines, endpoint),
            max_count=self._batch_limits[0],
            max_bytes=self._batch_limits[1],
            provider=self.name,
        )
        try:
            with self._translate_errors():
                file_id = await self._upload(spooled.path, key)
                batch = await self._create_batch(file_id, key, spooled.path, endpoint)
        finally:
            spooled.discard()
        meta = {"input_file_id": file_id, "request_count": spooled.count}
        return BatchHandle(self.name, str(pick(batch, "id")), key, meta)

    async def _create_batch(self, file_id: str, key: str, path: Path, endpoint: str) -> Any:
        """Create the batch of an uploaded input file (``path``, its local copy), tagged
        with ``key``, for ``endpoint``; the batch object."""
        return await self._client.batches.create(
            input_file_id=file_id,
            endpoint=endpoint,
            completion_window=self.completion_window,
            metadata={"agac_key": key},
        )

    async def _upload(self, path: Path, key: str) -> str:
        """Upload a batch's input file (``purpose=batch``); its file id."""
        with path.open("rb") as fh:
            uploaded = await self._client.files.create(
                file=(path.name, fh, "application/jsonl"), purpose="batch"
            )
        return str(uploaded.id)

    async def poll_batch(self, handle: BatchHandle) -> BatchStatus:
        with self._translate_errors():
            batch = await self._retrieve(handle.id)
        return self._batch_status(batch)

    async def _retrieve(self, batch_id: str) -> Any:
        """The batch object as the provider reports it now."""
        return await self._client.batches.retrieve(batch_id)

    def _batch_status(self, batch: Any) -> BatchStatus:
        return batch_status(batch)

    def _result_files(self, batch: Any) -> tuple[Any, ...]:
        """The ids of an ended batch's result files: answers first, then errors."""
        return (pick(batch, "output_file_id"), pick(batch, "error_file_id"))

    def _batch_count(self, batch: Any) -> int:
        """How many requests a batch object says it holds."""
        return as_int(pick(batch, "request_counts", "total"))

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        """Every line of the output file, then of the error file, as Results; nothing from
        a batch that is not ``completed`` when fetched here (B7)."""
        with self._translate_errors():
            batch = await self._retrieve(handle.id)
        ended_or_raise(handle, self._batch_status(batch))
        created = as_int(pick(batch, "created_at"))
        ended = as_int(pick(batch, "completed_at") or pick(batch, "finalizing_at")) or time.time()
        latency = max(0.0, (ended - created) * 1000.0) if created else 0.0
        for file_id in self._result_files(batch):
            if not file_id:
                continue
            async for lines in self._file_lines(str(file_id)):
                for line in lines:
                    yield self._result(json.loads(line), latency, handle.tools)

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        """The batch's ``completed`` count (an expired or cancelled batch bills what it
        completed), with its total ``usage`` where the provider reports one (OpenAI, for
        batches since September 2025; Groq reports none)."""
        with self._translate_errors():
            batch = await self._retrieve(handle.id)
        status = self._batch_status(batch)
        usage = pick(batch, "usage")
        if not usage:
            return BilledWork(status, status.completed)
        cached = as_int(pick(usage, "input_tokens_details", "cached_tokens"))
        total = Usage(
            max(0, as_int(pick(usage, "input_tokens")) - cached),
            as_int(pick(usage, "output_tokens")),
            cached,
            reasoning_tokens=as_int(pick(usage, "output_tokens_details", "reasoning_tokens")),
        )
        return BilledWork(status, status.completed, total)

    async def _file_lines(self, file_id: str) -> AsyncIterator[list[bytes]]:
        """The file's non-blank lines, a downloaded chunk's worth at a time (split here as
        bytes: the SDK's ``iter_lines`` decodes and splits line by line, a cost per
        result). ``bytes.splitlines`` splits at ``\n``, ``\r`` and ``\r\n`` only,
        none of which appears raw inside a JSON line."""
        with self._translate_errors():
            stream = self._client.files.with_streaming_response.content(file_id)
            async with stream as response:
                rest = b""
                async for chunk in response.iter_bytes(1 << 20):
                    end = chunk.rfind(b"\n") + 1
                    if not end:
                        rest += chunk
                        continue
                    lines = (rest + chunk[:end]).splitlines()
                    rest = chunk[end:]
                    yield [line for line in lines if line.strip()]
                if rest.strip():
                    yield [line for line in rest.splitlines() if line.strip()]

    def _result(
        self, line: dict[str, Any], latency_ms: float, offered: frozenset[str] = frozenset()
    ) -> Result:
        custom_id = str(line.get("custom_id"))
        response = line.get("response") or None
        error = line.get("error") or None
        status = as_int(pick(response, "status_code")) if response else 0
        request_id = pick(response, "request_id") if response else None
        if response and status == 200 and not error and is_response_object(response.get("body")):
            answer = read_response(
                response.get("body"),
                provider=self.name,
                latency_ms=latency_ms,
                service_tier="batch",
                request_id=request_id,
                offered=offered,
            )
            return Result(custom_id, "succeeded", response=answer)
        if response and status == 200 and not error:
            answer = chat_response(
                response.get("body"),
                provider=self.name,
                wire=True,
                latency_ms=latency_ms,
                service_tier="batch",
                request_id=request_id,
                offered=offered,
            )
            return Result(custom_id, "succeeded", response=answer)
        if response and status:
            error = self._line_error(status, pick(response, "body"), request_id)
            return Result(custom_id, "errored", error=error)
        code = str(pick(error, "code") or "") or None
        message = pick(error, "message")
        if code in _EXPIRED_CODES:
            return Result(custom_id, "expired")
        if code in _CANCELLED_CODES:
            return Result(custom_id, "canceled")
        err = classify(self.name, None, message=message, code=code)
        return Result(custom_id, "errored", error=err)

    def _line_error(self, status: int, body: Any, request_id: str | None) -> ProviderError:
        """The taxonomy error of a batch result line that the provider answered with an
        error status (``body`` its error body)."""
        code, kind, message, param = error_fields(body)
        return classify(
            self.name,
            status,
            message=message,
            code=code,
            kind=kind,
            param=param,
            request_id=request_id,
        )

    async def cancel_batch(self, handle: BatchHandle) -> None:
        with self._translate_errors():
            await self._client.batches.cancel(handle.id)

    async def find_batch(self, key: str) -> BatchHandle | None:
        """The newest batch whose ``metadata.agac_key`` is ``key``, scanning at most
        ``find_batch_scan`` (default 2000) batches."""
        seen = 0
        with self._translate_errors():
            async for batch in self._list_batches():
                if pick(batch, "metadata", "agac_key") == key:
                    meta = {
                        "input_file_id": pick(batch, "input_file_id"),
                        "request_count": self._batch_count(batch),
                    }
                    return BatchHandle(self.name, str(pick(batch, "id")), key, meta)
                seen += 1
                if seen >= self._scan_limit:
                    break
        return None


def _offered(request: Request) -> frozenset[str]:
    return frozenset(t.name for t in request.tools)


def batch_status(batch: Any) -> BatchStatus:
    """Normalize an OpenAI/Groq batch object; an unknown status is running (B9)."""
    raw = str(pick(batch, "status") or "")
    state = BATCH_STATES.get(raw)
    counts = pick(batch, "request_counts")
    return BatchStatus(
        state=state or "running",
        raw_status=raw,
        request_count=as_int(pick(counts, "total")),
        completed=as_int(pick(counts, "completed")),
        failed=as_int(pick(counts, "failed")),
        known=state is not None,
    )


def _schema_rejected(err: ProviderError) -> bool:
    return err.status == 400 and bool(_SCHEMA_REJECTED.search(str(err)))


class OpenAISdkProvider(OpenAICompatProvider):
    """An OpenAI-compatible API reached through the openai SDK at its own address
    (``base_url``, else the class's ``default_base_url`` — never ``OPENAI_BASE_URL``);
    ``max_retries=0``: the engine owns retries (docs/providers.md)."""

    def _make_client(self) -> Any:
        return self._sdk.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self._base_url or self.default_base_url,
            timeout=self._timeout,
            max_retries=0,
        )

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        return (self._sdk.OpenAIError,)
