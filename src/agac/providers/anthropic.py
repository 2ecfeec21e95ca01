"""Anthropic (``pip install -e '.[anthropic]'``): online calls on agac's lean transport
(or the official ``anthropic`` SDK with ``transport: sdk``), batches on the SDK.

Live calls use the Messages API. Structured output is sent as
``output_config: {"format": {"type": "json_schema", "schema": …}}``; a model that
rejects it (a 400 naming the parameter) gets a forced tool call instead — one tool
named ``answer`` whose ``input_schema`` is the schema — and is remembered.

Batches use the Message Batches API: requests go inline in the create call (no file
upload), results stream as JSONL from the batch's ``results_url``. Anthropic spells
cancellation with one L (``canceling``, ``canceled``); its only terminal status is
``ended``, also for a batch canceled while running, which then carries a result per
request (B8). Batches carry no metadata, so :meth:`find_batch` recovers a
lost submission by time window and request count (B2).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import warnings
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, ClassVar

from agac.errors import FatalError, ProviderError, UnsupportedError
from agac.providers._anthropic_wire import (
    batch_status,
    item_error,
    message_response,
    tool_schema,
)
from agac.providers._attachments import ANTHROPIC_LIMITS, anthropic_blocks, live_base64
from agac.providers._cache_wire import (
    anthropic_content,
    anthropic_minimum,
    anthropic_system,
    first_user,
)
from agac.providers._common import (
    SCHEMA_NAME,
    ended_or_raise,
    parse_json,
    pick,
    require_custom_id,
    stopwatch,
    url_segment,
)
from agac.providers._errors import (
    QUOTA_CODES,
    classify,
    connection_error,
    request_id_of,
    retry_after_seconds,
)
from agac.providers._search_wire import anthropic_web_search
from agac.providers._tool_wire import anthropic_chat, anthropic_tools, offered
from agac.providers.adapter import ProviderBase
from agac.providers.base import (
    TRANSPORTS,
    Attachment,
    BatchHandle,
    BatchStatus,
    BilledWork,
    Leg,
    ProviderSettings,
    Request,
    Response,
    Result,
)
from agac.providers.options import TIMEOUT, Option, structured_output
from agac.providers.servertools import Citation, distinct_citations
from agac.providers.spec import BatchSpec, ProviderSpec, WebSearchSpec

__all__ = ["AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: The ``anthropic-version`` header the SDK sends (anthropic 2.15); the lean transport
#: sends the same, and tests/integration/providers/test_transport_equivalence.py holds
#: the two together when the lock moves.
API_VERSION = "2026-10-21"
#: Calls of one turn at most when the provider pauses it (``pause_turn``), the first
#: included: a turn still paused after them fails ``unexpected_stop``.
PAUSE_LEGS = 5
BATCH_MAX_REQUESTS = 100_000
BATCH_MAX_BYTES = 256 * 1024 * 1024

logger = logging.getLogger(__name__)
# The SDK warns (DeprecationWarning) on every call to a model near its end of life.
_DEPRECATED_MODEL = r"The model '.*' is deprecated"

_SCHEMA_PARAMS = ("output_config", "output_format", "json_schema", "structured output")


class AnthropicProvider(ProviderBase):
    """Anthropic Messages and Message Batches."""

    spec = ProviderSpec(
        name="anthropic",
        extra="anthropic",
        sdk_module="anthropic",
        credential_env=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
        transports=TRANSPORTS,
        # Requests go inline in the create call, held in memory: with attachments, parts
        # of at most 64 MiB (their base64 included) keep that memory bounded. Batches
        # carry no metadata: a lost submission is found by time window and count (B2).
        batch=BatchSpec(
            input="inline",
            max_requests=BATCH_MAX_REQUESTS,
            max_bytes=BATCH_MAX_BYTES,
            attachment_max_bytes=64 * 1024 * 1024,
            find="window",
            tools=True,
        ),
        cache_kinds=("marker",),
        # 4,096 for Opus 4.5 and Haiku 4.5, 2,048 for Haiku 3 and 3.5, 1,024 for the others.
        cache_minimum=anthropic_minimum,
        #: Images and PDFs (``image`` and ``document`` blocks) and their limits.
        attachments=ANTHROPIC_LIMITS,
        server_tools=("web_search", "web_fetch", "code_execution"),
        web_search=WebSearchSpec(
            "Anthropic's web search tool (web_search_20250305)",
            options=("max_uses", "allowed_domains", "blocked_domains", "user_location"),
        ),
        vision=True,
        function_tools=True,
        #: ``providers: anthropic:`` in agac.yml.
        options=(
            TIMEOUT,
            structured_output("tool", "a forced tool call whose input is the answer"),
            Option(
                "find_batch_skew",
                "number",
                "seconds added on each side of the time window in "
                "which B2 recovery looks for a submission whose answer was lost",
                default=120,
            ),
        ),
    )
    base_url_env = "ANTHROPIC_BASE_URL"
    #: Body fields the SDK's ``create`` has no argument for, sent with every SDK call
    #: (Claude on Vertex: its ``anthropic_version``).
    _body_extra: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, settings: ProviderSettings) -> None:
        # Said once per model in agac's log instead of a Python warning on every call; a
        # process-wide filter, as catch_warnings() is not safe across concurrent tasks.
        warnings.filterwarnings("ignore", message=_DEPRECATED_MODEL, category=DeprecationWarning)
        self._lifecycle_asked: set[str] = set()
        self._lifecycle_lookups: set[asyncio.Task[None]] = set()
        super().__init__(settings)
        self._forced_tool: set[str] = set()
        self._force_tool = settings.options.get("structured_output") == "tool"
        self._skew = float(settings.options.get("find_batch_skew", 120.0))

    def _lean_headers(self) -> dict[str, str]:
        return _lean_headers(self._api_key)

    def _open_lean(self) -> None:
        self._messages_url = (self._base_url or DEFAULT_BASE_URL).rstrip("/") + "/v1/messages"

    def _make_client(self) -> Any:
        """The SDK's async client (batches, or ``transport: sdk``)."""
        key = self._api_key
        auth = {"auth_token": key} if _is_auth_token(self.settings, key) else {"api_key": key}
        # max_retries=0: the engine owns retries (docs/providers.md).
        return self._sdk.AsyncAnthropic(
            base_url=self._base_url, timeout=self._timeout, max_retries=0, **auth
        )

    # -- errors --------------------------------------------------------------

    def _status_error(
        self, status: int, headers: Mapping[str, str], body: Any, text: str, code: str | None = None
    ) -> ProviderError:
        """The taxonomy error for a non-2xx answer, on either transport.

        The body is ``{"type": "error", "error": {"type", "message", …}, "request_id"}``;
        the spend cap is a 429 marked by ``error.details.error_code`` (no Retry-After).
        """
        kind = pick(body, "error", "type")
        code = (
            code
            or pick(body, "error", "details", "error_code")
            or pick(body, "error", "code")
            or kind
        )
        return classify(
            self.name,
            status,
            message=pick(body, "error", "message") or text,
            retry_after=retry_after_seconds(headers),
            code=str(code) if code is not None else None,
            quota=code in QUOTA_CODES,
            kind=str(kind) if kind else None,
            request_id=request_id_of(headers, body),
        )

    def _sdk_error(self, exc: Exception) -> ProviderError | None:
        sdk = self._sdk
        if isinstance(exc, sdk.APIStatusError):
            # (``error_code`` is read off the body: older SDKs have no such attribute.)
            return self._status_error(exc.status_code, exc.response.headers, exc.body, exc.message)
        if isinstance(exc, sdk.APIConnectionError):
            return connection_error(self.name, exc)
        return None

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        return (self._sdk.AnthropicError,)

    # -- online --------------------------------------------------------------

    def _params(self, request: Request, *, tool: bool) -> dict[str, Any]:
        """The Messages body: system is top-level, messages are user/assistant only. A
        cache hint marks the system prompt and the first user message's static head
        (:mod:`agac.providers._cache_wire`); without one, nothing is marked."""
        hint = request.cache
        chat = request.chat
        first = first_user(chat) if hint is not None else -1
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": anthropic_chat(
                chat, lambda i, m: anthropic_content(m, hint if i == first else None, _blocks)
            ),
        }
        if request.system:
            params["system"] = anthropic_system(request.system, hint)
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.schema is not None:
            if tool:
                params["tools"] = [
                    {
                        "name": SCHEMA_NAME,
                        "description": "Record the answer.",
                        "input_schema": tool_schema(request.schema),
                    }
                ]
                # With functions offered the model must be free to call them: any tool,
                # the answer's included.
                params["tool_choice"] = (
                    {"type": "any"}
                    if request.tools or request.web_search is not None
                    else {"type": "tool", "name": SCHEMA_NAME}
                )
            else:
                params["output_config"] = {
                    "format": {"type": "json_schema", "schema": request.schema}
                }
        if request.tools:
            params["tools"] = [*anthropic_tools(request), *params.get("tools", ())]
        if request.web_search is not None:
            params["tools"] = [*params.get("tools", ()), anthropic_web_search(request.web_search)]
        return params

    def _use_tool(self, model: str) -> bool:
        return self._force_tool or model in self._forced_tool

    async def complete(self, request: Request) -> Response:
        tool = self._use_tool(request.model)
        try:
            return await self._create(request, tool=tool)
        except FatalError as err:
            if request.schema is None or tool or not _schema_rejected(err):
                raise
            self._forced_tool.add(request.model)
            return await self._create(request, tool=True)

    async def _create(self, request: Request, *, tool: bool) -> Response:
        params = self._params(request, tool=tool)
        first = await self._send(request, params)
        return await self._continue(request, params, first, paused=None)

    async def continue_turn(self, request: Request, paused: Response) -> Response:
        """Continue a paused answer (a batch's, read from its results) live: the answer
        it returns carries the live legs before it, not the paused call itself."""
        params = self._params(request, tool=self._use_tool(request.model))
        return await self._continue(request, params, paused, paused=paused)

    async def _continue(
        self, request: Request, params: dict[str, Any], answer: Response, *, paused: Response | None
    ) -> Response:
        """Continue a turn the provider paused (``pause_turn``) as Anthropic documents it:
        the paused content goes back as the assistant turn (growing with each pause), at
        most :data:`PAUSE_LEGS` calls in all; each earlier live call is a :class:`Leg`
        (``paused``: a call already ledgered elsewhere — a batch's — that starts the turn).
        The answer's text is the turn's text blocks, every leg's, in order."""
        legs: tuple[Leg, ...] = ()
        assistant: list[Any] = []
        before = ""
        cited: tuple[Citation, ...] = ()
        calls = 1
        while answer.stop_reason == "paused":
            if calls >= PAUSE_LEGS:
                said = (
                    f"anthropic paused the turn (pause_turn) {calls} times; agac continues "
                    f"a paused turn at most {PAUSE_LEGS - 1} times"
                )
                return replace(answer, legs=legs, stop_detail=said)
            if answer is not paused:
                legs += (
                    Leg(
                        answer.usage,
                        answer.latency_ms,
                        answer.request_id,
                        answer.raw_stop,
                        answer.service_tier,
                    ),
                )
            before += answer.text
            cited += answer.citations
            assistant += list(answer.paused or [])
            answer = await self._send(
                request,
                {
                    **params,
                    "messages": [*params["messages"], {"role": "assistant", "content": assistant}],
                },
            )
            calls += 1
        if not assistant:
            return answer
        text = before + answer.text
        parsed = answer.parsed
        if parsed is None and request.schema is not None and answer.stop_reason == "end":
            parsed = parse_json(text)
        citations = distinct_citations((*cited, *answer.citations))
        return replace(answer, text=text, parsed=parsed, legs=legs, citations=citations)

    async def _send(self, request: Request, params: dict[str, Any]) -> Response:
        """One Messages call on the transport in use."""
        parse = request.schema is not None
        if self._http is not None:
            with stopwatch() as took:
                body, headers = await self._http.post_with_headers(
                    self._messages_url, params, errors=self._status_error, timeout=request.timeout
                )
            self._ask_lifecycle(request.model)
            return message_response(
                body,
                latency_ms=took[0],
                parse=parse,
                request_id=request_id_of(headers),
                offered=offered(request),
            )
        # The SDK's ``create`` has no ``temperature`` argument; the API takes it.
        params = dict(params)
        extra = dict(self._body_extra)
        if "temperature" in params:
            extra["temperature"] = params.pop("temperature")
        # An explicit timeout also skips the SDK's guard against long non-streaming calls.
        timeout = request.timeout if request.timeout is not None else self._timeout
        with self._translate_errors(), stopwatch() as took:
            message = await self._client.messages.create(
                **params, extra_body=extra or None, timeout=timeout
            )
        self._ask_lifecycle(request.model)
        return message_response(
            message,
            latency_ms=took[0],
            parse=parse,
            request_id=getattr(message, "_request_id", None),
            offered=offered(request),
        )

    def _ask_lifecycle(self, model: str) -> None:
        """Look the model's lifecycle up once, beside the calls: a slow or unreachable Models
        API never holds an answer back; :meth:`aclose` waits for the lookups still out."""
        if model in self._lifecycle_asked:
            return
        self._lifecycle_asked.add(model)
        task = asyncio.get_running_loop().create_task(self._say_lifecycle(model))
        self._lifecycle_lookups.add(task)
        task.add_done_callback(self._lifecycle_lookups.discard)

    async def _say_lifecycle(self, model: str) -> None:
        """Say once per model, in agac's log, that it is deprecated or retired.

        The provider's public Models API says so (``lifecycle``, ``retires_at``); it is
        asked once per model, after the model's first answer, on the transport in use.
        Not knowing — the call fails, times out, or the answer lacks the field — is the
        feature off: nothing is said and nothing fails.
        """
        try:
            lifecycle, retires = await self._model_lifecycle(model)
        except Exception as exc:  # noqa: BLE001 - a log line must never fail a call
            logger.debug("anthropic model %s: lifecycle unknown (%s)", model, exc)
            return
        if lifecycle not in ("deprecated", "retired"):
            return
        when = f"retires {retires:%Y-%m-%d}" if isinstance(retires, datetime) else "no date set"
        logger.warning(
            "anthropic model %s is %s (%s): move to a newer model", model, lifecycle, when
        )

    async def _model_lifecycle(self, model: str) -> tuple[Any, datetime | None]:
        """(``lifecycle``, ``retires_at``) of ``model`` from ``GET /v1/models/{id}``."""
        timeout = min(self._timeout, 10.0)
        if self._http is None:
            info = await self._client.models.retrieve(model, timeout=timeout)
            return getattr(info, "lifecycle", None), getattr(info, "retires_at", None)
        url = f"{(self._base_url or DEFAULT_BASE_URL).rstrip('/')}/v1/models/{url_segment(model)}"
        body = await self._http.get(url, errors=self._status_error, timeout=timeout)
        retires = pick(body, "retires_at")
        when = datetime.fromisoformat(retires) if isinstance(retires, str) else None
        return pick(body, "lifecycle"), when

    # -- batch ---------------------------------------------------------------

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        """Create a Message Batch; requests go inline (the SDK takes a list)."""
        items: list[dict[str, Any]] = []
        size = 0
        for request in requests:
            item = {
                "custom_id": require_custom_id(request),
                "params": self._params(request, tool=self._use_tool(request.model)),
            }
            size += len(json.dumps(item, separators=(",", ":")))
            items.append(item)
            if len(items) > BATCH_MAX_REQUESTS or size > BATCH_MAX_BYTES:
                raise UnsupportedError(
                    f"anthropic batch exceeds {BATCH_MAX_REQUESTS} requests or "
                    f"{BATCH_MAX_BYTES} bytes",
                    code="batch_too_large",
                )
        if not items:
            raise ValueError("a batch needs at least one request")
        with self._translate_errors():
            batch = await self._client.messages.batches.create(requests=items)
        meta = {"request_count": len(items), "created_at": _epoch(batch.created_at)}
        return BatchHandle(self.name, str(batch.id), key, meta)

    async def poll_batch(self, handle: BatchHandle) -> BatchStatus:
        with self._translate_errors():
            batch = await self._client.messages.batches.retrieve(handle.id)
        return batch_status(batch)

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        """Stream the results JSONL; ``errored`` items carry a taxonomy error. Nothing is
        read from a batch that has not ``ended`` when fetched here (B7)."""
        with self._translate_errors():
            batch = await self._client.messages.batches.retrieve(handle.id)
            ended_or_raise(handle, batch_status(batch))
            created, ended = _epoch(batch.created_at), _epoch(batch.ended_at)
            latency = max(0.0, (ended - created) * 1000.0) if created and ended else 0.0
            decoder = await self._client.messages.batches.results(handle.id)
            async for item in decoder:
                yield self._result(item, latency, handle.tools)

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        """The batch's ``succeeded`` count (0 until it ends: Anthropic counts only then);
        Anthropic reports no total usage for a batch."""
        with self._translate_errors():
            batch = await self._client.messages.batches.retrieve(handle.id)
        status = batch_status(batch)
        return BilledWork(status, status.completed)

    def _result(
        self, item: Any, latency_ms: float, offered: frozenset[str] = frozenset()
    ) -> Result:
        custom_id = str(pick(item, "custom_id"))
        result = pick(item, "result")
        kind = str(pick(result, "type"))
        if kind == "succeeded":
            answer = message_response(
                pick(result, "message"),
                latency_ms=latency_ms,
                service_tier="batch",
                offered=offered,
            )
            return Result(custom_id, "succeeded", response=answer)
        if kind == "canceled":
            return Result(custom_id, "canceled")
        if kind == "expired":
            return Result(custom_id, "expired")
        return Result(custom_id, "errored", error=item_error(self.name, pick(result, "error")))

    async def cancel_batch(self, handle: BatchHandle) -> None:
        with self._translate_errors():
            await self._client.messages.batches.cancel(handle.id)

    async def find_batch(
        self,
        key: str,
        *,
        created_after: datetime | float | None = None,
        created_before: datetime | float | None = None,
        request_count: int | None = None,
    ) -> BatchHandle | None:
        """Recover a submission whose answer was lost (B2).

        Anthropic batches carry no metadata, so ``key`` cannot be matched. Instead:
        the batches created inside the intent's window (widened by
        ``find_batch_skew`` seconds, default 120, for clock skew) with the same
        request count. Exactly one candidate is adopted (the engine verifies its
        custom_ids when it ends); none or several return None. Without a window
        nothing is certain: None.
        """
        candidates = await self.batch_candidates(
            created_after=created_after,
            created_before=created_before,
            request_count=request_count,
        )
        if len(candidates) != 1:
            return None
        found = candidates[0]
        return BatchHandle(found.provider, found.id, key, {**found.meta, "adopted_by": "window"})

    async def batch_candidates(
        self,
        *,
        created_after: datetime | float | None,
        created_before: datetime | float | None = None,
        request_count: int | None = None,
    ) -> list[BatchHandle]:
        """Batches created in the window (newest first) with ``request_count`` requests."""
        if created_after is None:
            return []
        low = _epoch(created_after) - self._skew
        high = (_epoch(created_before) if created_before is not None else float("inf")) + self._skew
        found: list[BatchHandle] = []
        with self._translate_errors():
            async for batch in self._client.messages.batches.list(limit=100):
                created = _epoch(batch.created_at)
                if created < low:
                    break  # listed newest first: the rest are older
                if created > high:
                    continue
                total = batch_status(batch).request_count
                if request_count is not None and total != request_count:
                    continue
                meta = {"request_count": total, "created_at": created}
                found.append(BatchHandle(self.name, str(batch.id), "", meta))
        return found

    async def aclose(self) -> None:
        if self._lifecycle_lookups:  # each bounded by its own timeout (<= 10 s)
            await asyncio.gather(*self._lifecycle_lookups, return_exceptions=True)
        await super().aclose()


def _blocks(text: str, attachments: tuple[Attachment, ...], position: str) -> list[dict[str, Any]]:
    """A message's content blocks, its attachments read now (live and batch alike: a
    Message Batch goes inline)."""
    return anthropic_blocks(text, attachments, position, live_base64)


def _schema_rejected(err: ProviderError) -> bool:
    text = str(err).lower()
    return err.status == 400 and any(p in text for p in _SCHEMA_PARAMS)


def _lean_headers(key: str) -> dict[str, str]:
    """Auth and version headers as the SDK sends them (an API key and an auth token
    alike go as a Bearer token), plus ``ANTHROPIC_CUSTOM_HEADERS`` (``Name: value``
    lines), which the SDK honours too."""
    headers = {"Authorization": f"Bearer {key}", "anthropic-version": API_VERSION}
    for line in os.environ.get("ANTHROPIC_CUSTOM_HEADERS", "").split("\n"):
        name, colon, value = line.partition(":")
        if colon and name.strip():
            headers[name.strip()] = value.strip()
    return headers


def _is_auth_token(settings: ProviderSettings, key: str) -> bool:
    """A key that came from ANTHROPIC_AUTH_TOKEN is sent as a Bearer token."""
    return not settings.api_key and not os.environ.get("ANTHROPIC_API_KEY") and bool(key)


def _epoch(value: datetime | float | None) -> float:
    if value is None:
        return 0.0
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp()
    return float(value)
