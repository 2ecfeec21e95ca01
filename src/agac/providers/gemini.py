"""Google Gemini (Developer API) (``pip install -e '.[gemini]'``): online calls on agac's
lean transport (or the official ``google-genai`` SDK with ``transport: sdk``), batches
and files on the SDK.

Live calls use ``generateContent`` with ``response_json_schema`` and
``response_mime_type: application/json``; a model that rejects the schema (a 400
naming it) falls back to JSON mode with the schema in the system instruction.

A request whose attachments come to more than the 20 MB inline limit sends its largest
files through the Files API as ``file_data`` parts, live and in batch lines
(:mod:`agac.providers._gemini_files`).

Batches use ``batchGenerateContent``: requests go inline when they total under
20 MB, else as an uploaded JSONL file (``{"key", "request"}`` lines in the REST
wire form). The batch's ``display_name`` is our idempotency key (for
:meth:`find_batch`); the custom_id travels as ``metadata.key`` on inline requests
and as ``key`` on file lines, the documented convention for both. On the wire states are ``BATCH_STATE_*``; the SDK renames them
``JOB_STATE_*``. Retries are off simply by never passing ``retry_options``.

Quirk: the SDK warns (``UserWarning``) when it meets a state, finish reason or block
reason its enums lack; that warning is silenced here because each is handled (an unknown
state is still running, B9; an unknown finish reason is a stop agac does not know).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import os
import re
import tempfile
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from agac.errors import FatalError, ProviderError, RetryableError, UnsupportedError, WaitError
from agac.media import read_verified
from agac.providers._attachments import GEMINI_LIMITS, Blobs, gemini_parts, live_base64
from agac.providers._cache_wire import first_user, gemini_cache_name, gemini_minimum, gemini_rest
from agac.providers._common import (
    dump_line,
    ended_or_raise,
    fallback_system,
    import_sdk,
    pick,
    read_lines,
    require_custom_id,
    spool_jsonl_async,
    stopwatch,
    url_path,
)
from agac.providers._errors import CAPACITY_WAIT
from agac.providers._gemini_files import (
    GeminiFiles,
    Uploaded,
    lean_delete,
    lean_upload,
    line_bytes,
    sdk_delete,
    sdk_upload,
)
from agac.providers._gemini_wire import (
    api_error,
    batch_status,
    content_response,
    item_error,
    status_error,
)
from agac.providers._search_wire import gemini_schema_with_search
from agac.providers._tool_wire import gemini_tool_content, gemini_tools, is_tool_turn, offered
from agac.providers.adapter import ProviderBase
from agac.providers.base import (
    TRANSPORTS,
    Attachment,
    BatchHandle,
    BatchStatus,
    BilledWork,
    CacheHint,
    ProviderSettings,
    Request,
    Response,
    Result,
    Usage,
)
from agac.providers.contextcaches import ContextCache
from agac.providers.options import FIND_BATCH_SCAN, TIMEOUT, Option, structured_output
from agac.providers.spec import BatchSpec, FlexSpec, ProviderSpec, WebSearchSpec

__all__ = ["GeminiProvider", "api_version", "model_path", "wire_request"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
DEFAULT_API_VERSION = "v1"  # google-genai 3.x's default for the Developer API
INLINE_MAX_BYTES = 20 * 1024 * 1024 - 256 * 1024  # under 20 MB, with room for the envelope
FILE_MAX_BYTES = 2 * 1024 * 1024 * 1024
BATCH_MAX_REQUESTS = 10_000_000  # no documented count limit; bytes bind first

_SCHEMA_REJECTED = re.compile(
    r"response_?json_?schema|responseJsonSchema|response_?schema", re.IGNORECASE
)
# Values its enums lack: a state (B9: still running) or a finish/block reason or safety
# word (read as a stop agac does not know, with the raw value kept).
_UNKNOWN_STATE = (
    r".* is not a valid (JobState|FinishReason|BlockedReason|HarmCategory|"
    r"HarmProbability)"
)


#: The model families Gemini serves on its flex tier.
FLEX_MODELS = ("gemini-2.5-", "gemini-3")


def gemini_flex_model(model: str) -> bool:
    return model.startswith(FLEX_MODELS)


class GeminiProvider(ProviderBase):
    """Gemini Developer API: generateContent and the Batch API."""

    spec = ProviderSpec(
        name="gemini",
        extra="gemini",
        sdk_module="google.genai",
        credential_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        transports=TRANSPORTS,
        # Requests inline under 20 MB, else an uploaded JSONL file; over the inline limit
        # a line names its largest attachments by their Files API upload.
        batch=BatchSpec(
            input="inline_or_file",
            max_requests=BATCH_MAX_REQUESTS,
            max_bytes=FILE_MAX_BYTES,
            attachment_line_bytes=line_bytes,
            tools=True,
        ),
        cache_kinds=("explicit", "implicit"),
        # 1,024 for the Flash models, 4,096 for the Pro ones and any other.
        cache_minimum=gemini_minimum,
        #: Images and PDFs as ``inline_data`` parts, the request under 20 MB; over it, the
        #: largest as ``file_data`` parts naming their Files API upload.
        attachments=GEMINI_LIMITS,
        server_tools=("web_search",),
        web_search=WebSearchSpec(
            "Google Search grounding (google_search)", with_schema=gemini_schema_with_search
        ),
        vision=True,
        function_tools=True,
        # ``service_tier: flex`` on generateContent (the Gemini 2.5 and 3 models), at half
        # the standard price: the batch rate.
        flex=FlexSpec(billed="batch", models=gemini_flex_model),
        #: ``providers: gemini:`` in agac.yml.
        options=(
            TIMEOUT,
            structured_output("json_mode", "JSON mode with the schema in the prompt"),
            Option(
                "batch_input",
                "choice",
                "how a batch's requests travel: `inline` in the create "
                "call, a `file` upload, or `auto` (inline under `inline_max_bytes`)",
                default="auto",
                choices=("auto", "inline", "file"),
            ),
            Option(
                "inline_max_bytes",
                "integer",
                "the largest batch sent inline with `batch_input: auto`",
                default=INLINE_MAX_BYTES,
                minimum=1,
            ),
            FIND_BATCH_SCAN,
        ),
    )
    base_url_env = "GOOGLE_GEMINI_BASE_URL"

    def __init__(self, settings: ProviderSettings) -> None:
        self._errors_module: Any = None
        self._files = GeminiFiles()
        super().__init__(settings)
        self._no_schema: set[str] = set()
        self._gone_caches: set[str] = set()
        self._force_json_mode = settings.options.get("structured_output") == "json_mode"
        self._batch_input = str(settings.options.get("batch_input", "auto"))
        self._inline_max = int(settings.options.get("inline_max_bytes", INLINE_MAX_BYTES))
        self._scan_limit = int(settings.options.get("find_batch_scan", 2000))

    def _lean_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key}

    def _open_lean(self) -> None:
        root = (self._base_url or DEFAULT_BASE_URL).rstrip("/")
        self._models_url = f"{root}/{api_version()}/"
        self._root = root
        self._server_timeouts: dict[float, dict[str, str]] = {}

    @property
    def _errors(self) -> Any:
        if self._errors_module is None:
            self._sdk  # noqa: B018 - imports the SDK
            self._errors_module = import_sdk("google.genai.errors", self.spec.extra)
        return self._errors_module

    def _make_client(self) -> Any:
        self._errors  # noqa: B018 - imports the SDK
        # One attempt: the engine owns retries (docs/providers.md); retry_options also stops
        # any retry of the SDK's own.
        http_options: dict[str, Any] = {
            "timeout": int(self._timeout * 1000),
            "retry_options": {"attempts": 1},
            "async_client_args": {"transport": _httpx_transport()},
        }
        if self._base_url:
            http_options["base_url"] = self._base_url
        client = self._sdk.Client(**self._client_args(), http_options=http_options)
        # A process-wide filter, not catch_warnings(): that is not safe across tasks.
        warnings.filterwarnings("ignore", message=_UNKNOWN_STATE, category=UserWarning)
        return client

    def _client_args(self) -> dict[str, Any]:
        """How the SDK's client authenticates and which API it speaks."""
        return {"api_key": self._api_key, "vertexai": False}

    @property
    def _aio(self) -> Any:
        """The SDK's async client, built on first use (batches, or ``transport: sdk``)."""
        return self._client.aio

    # -- errors --------------------------------------------------------------

    def _sdk_error(self, exc: Exception) -> ProviderError | None:
        if isinstance(exc, self._errors.APIError):
            return api_error(self.name, exc)
        return None

    def _status_error(
        self, status: int, headers: Mapping[str, str], body: Any, text: str
    ) -> ProviderError:
        """A non-2xx answer on the lean transport, read as the SDK's APIError reads it
        (a body that is not JSON becomes its message)."""
        if not isinstance(body, dict):
            body = {"message": text}
        return status_error(self.name, status, body, headers)

    # -- online --------------------------------------------------------------

    def _generation(self, request: Request, *, native: bool) -> dict[str, Any]:
        """Generation settings in the SDK's snake_case form (system included). A request
        that uses an explicit cache (:func:`_explicit_cache`) names it as
        ``cached_content`` and leaves out the system instruction the cache holds."""
        config: dict[str, Any] = {"max_output_tokens": request.max_tokens}
        system = request.system
        cache = _explicit_cache(request, native=native)
        if cache is not None and gemini_cache_name(cache) in self._gone_caches:
            cache = None
        if cache is not None:
            config["cached_content"] = gemini_cache_name(cache)
            if cache.system:
                system = None
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.seed is not None:
            config["seed"] = request.seed
        if request.schema is not None:
            config["response_mime_type"] = "application/json"
            if native:
                config["response_json_schema"] = request.schema
            else:
                system = fallback_system(request)
        if system:
            config["system_instruction"] = system
        if request.tier == "flex":
            config["service_tier"] = "flex"  # the SDK sends it as the body's serviceTier
        if request.tools or request.web_search is not None:
            config["tools"] = gemini_tools(request, rest=False)
        return config

    def _native_schema(self, model: str) -> bool:
        return not self._force_json_mode and model not in self._no_schema

    async def complete(self, request: Request) -> Response:
        native = self._native_schema(request.model)
        try:
            return await self._flex_waits(request, native=native)
        except FatalError as err:
            if request.schema is None or not native or not _schema_rejected(err):
                raise
            self._no_schema.add(request.model)
            return await self._flex_waits(request, native=False)

    async def _flex_waits(self, request: Request, *, native: bool) -> Response:
        """Gemini's flex tier sheds load with ``503 UNAVAILABLE``: on a flex request that
        is its capacity refusal, a wait that spends no attempt (as OpenAI's 429
        ``resource_unavailable`` and Groq's 498); on a standard request it stays a
        retryable error."""
        try:
            return await self._generate(request, native=native)
        except RetryableError as err:
            if request.tier != "flex" or err.status != 503:
                raise
            raise WaitError(
                f"{err} (the flex tier has no capacity now: agac waits and asks again)",
                status=err.status,
                code=err.code,
                retry_after=err.retry_after if err.retry_after is not None else CAPACITY_WAIT,
                request_id=err.request_id,
            ) from err

    async def _generate(self, request: Request, *, native: bool) -> Response:
        """One ``generateContent``. A cache that has vanished at Gemini (deleted, or lost
        before its expiry) fails the call 403/404 ``CachedContent not found``, which would
        otherwise read as a bad key: the call is sent again whole, and every later request
        naming that cache goes whole at once (the run's next renewal makes a new one)."""
        config = self._generation(request, native=native)
        try:
            return await self._send(request, config)
        except ProviderError as err:
            name = config.get("cached_content")
            if name is None or not _cache_gone_error(err):
                raise
            self._gone_caches.add(str(name))
            return await self._send(request, self._generation(request, native=native))

    async def _send(self, request: Request, config: dict[str, Any]) -> Response:
        parse = request.schema is not None
        uris = await self._file_uris(request) if request.attachments else None
        if self._http is not None:
            seconds = request.timeout if request.timeout is not None else self._timeout
            url = f"{self._models_url}{url_path(self._model_name(request.model))}:generateContent"
            headers = await self._call_headers(seconds)
            with stopwatch() as took:
                body = await self._http.post(
                    url,
                    wire_request(request, config, uris=uris),
                    errors=self._status_error,
                    timeout=seconds,
                    headers=headers,
                )
            return content_response(body, latency_ms=took[0], parse=parse, offered=offered(request))
        if request.timeout is not None:
            config["http_options"] = {"timeout": int(request.timeout * 1000)}
        with self._translate_errors(), stopwatch() as took:
            answer = await self._aio.models.generate_content(
                model=url_path(self._model_name(request.model)),
                contents=_contents(request, uris=uris, cached="cached_content" in config),
                config=config,
            )
        return content_response(answer, latency_ms=took[0], parse=parse, offered=offered(request))

    # -- the Files API (attachments too big to go inline) ----------------------------------

    async def _file_uris(self, request: Request, *, batch: bool = False) -> dict[str, str]:
        """SHA-256 → URI of the request's files that go through the Files API: none while
        the request fits inline (:mod:`agac.providers._gemini_files`). Batches upload
        with the SDK, live calls on their transport."""
        upload = self._upload_sdk if batch or self._http is None else self._upload_lean
        return await self._files.uris(request, upload, batch=batch)

    async def _upload_lean(self, att: Attachment) -> Uploaded:
        assert self._http is not None
        return await lean_upload(self._http, self._root, api_version(), self._status_error, att)

    async def _upload_sdk(self, att: Attachment) -> Uploaded:
        with self._translate_errors():
            return await sdk_upload(self._aio, att)

    async def _delete_file(self, name: str) -> None:
        if self._http is not None:
            await lean_delete(self._http, self._root, api_version(), self._status_error, name)
            return
        with self._translate_errors():
            await sdk_delete(self._aio, name)

    def _model_name(self, model: str) -> str:
        """The model's resource name in a path (``models/<name>`` on the Developer API)."""
        return model_path(model)

    async def _call_headers(self, seconds: float) -> dict[str, str]:
        """The headers of one live call on the lean transport (its auth is the session's)."""
        return self._server_timeout(seconds)

    def _server_timeout(self, seconds: float) -> dict[str, str]:
        """``X-Server-Timeout``, whole seconds rounded up, as the SDK sends it."""
        found = self._server_timeouts.get(seconds)
        if found is None:
            found = self._server_timeouts[seconds] = {"X-Server-Timeout": str(math.ceil(seconds))}
        return found

    # -- explicit context caches ---------------------------------------------

    async def create_context_cache(
        self, model: str, system: str | None, prefix: str, ttl_seconds: float, display_name: str
    ) -> ContextCache:
        """``cachedContents.create`` with the system instruction and the prefix as the first
        user turn, living ``ttl_seconds`` (whole seconds, at least one)."""
        config: dict[str, Any] = {
            "ttl": f"{max(1, math.ceil(ttl_seconds))}s",
            "display_name": display_name,
        }
        if prefix:
            config["contents"] = [{"role": "user", "parts": [{"text": prefix}]}]
        if system:
            config["system_instruction"] = system
        with self._translate_errors():
            cache = await self._aio.caches.create(model=model_path(model), config=config)
        expires = pick(cache, "expire_time")
        return ContextCache(
            str(cache.name),
            int(pick(cache, "usage_metadata", "total_token_count") or 0),
            expires.timestamp() if isinstance(expires, datetime) else time.time() + ttl_seconds,
        )

    async def delete_context_cache(self, name: str) -> None:
        """``cachedContents.delete``; a cache already gone is not an error. Gemini answers
        one it no longer has 404, or 403 ``CachedContent not found (or permission
        denied)``."""
        with self._translate_errors():
            try:
                await self._aio.caches.delete(name=name)
            except self._errors.APIError as exc:
                if not _cache_gone(exc):
                    raise

    # -- batch ---------------------------------------------------------------

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        """Create a batch named ``key``: inline under 20 MB, else an uploaded file.

        The option ``batch_input`` (``auto``, ``inline``, ``file``) forces one form.
        """
        inline: list[dict[str, Any]] | None = [] if self._batch_input != "file" else None
        models: set[str] = set()
        size = 0

        async def lines() -> AsyncIterator[bytes | list[bytes | Attachment]]:
            nonlocal inline, size
            for request in requests:
                custom_id = require_custom_id(request)
                models.add(request.model)
                config = self._generation(request, native=self._native_schema(request.model))
                if request.attachments:  # streamed into the uploaded file, never inline
                    uris = await self._file_uris(request, batch=True)
                    inline, pieces = None, _attachment_line(custom_id, request, config, uris)
                    size += sum(len(p) for p in pieces if isinstance(p, bytes)) + 1
                    yield pieces
                    continue
                data = dump_line({"key": custom_id, "request": wire_request(request, config)})
                size += len(data) + 1
                if inline is not None:
                    inline.append(
                        {
                            "contents": _contents(request, cached="cached_content" in config),
                            "config": config,
                            "metadata": {"key": custom_id},
                        }
                    )
                    if size > self._inline_max and self._batch_input != "inline":
                        inline = None  # too big to go inline: the file alone is kept
                yield data

        spooled = await spool_jsonl_async(
            lines(), max_count=BATCH_MAX_REQUESTS, max_bytes=FILE_MAX_BYTES, provider=self.name
        )
        try:
            if len(models) != 1:
                raise ValueError("a Gemini batch takes one model")
            if self._batch_input == "inline" and size > self._inline_max:
                raise UnsupportedError("gemini inline batch over 20 MB", code="batch_too_large")
            with self._translate_errors():
                if inline is not None:
                    src: Any = inline
                    meta = {"input": "inline"}
                else:
                    uploaded = await self._aio.files.upload(
                        file=str(spooled.path), config={"mime_type": "jsonl", "display_name": key}
                    )
                    src = uploaded.name
                    meta = {"input": "file", "input_file": uploaded.name}
                job = await self._aio.batches.create(
                    model=url_path(model_path(models.pop())), src=src, config={"display_name": key}
                )
        finally:
            spooled.discard()
        return BatchHandle(self.name, str(job.name), key, {**meta, "request_count": spooled.count})

    async def poll_batch(self, handle: BatchHandle) -> BatchStatus:
        with self._translate_errors():
            job = await self._aio.batches.get(name=handle.id)
        return batch_status(job)

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        """Inline responses, or the result file downloaded to disk and read line by line;
        nothing from a batch that has not succeeded when fetched here (B7)."""
        with self._translate_errors():
            job = await self._aio.batches.get(name=handle.id)
        ended_or_raise(handle, batch_status(job))
        latency = _span_ms(pick(job, "create_time"), pick(job, "end_time"))
        dest = pick(job, "dest")
        for item in pick(dest, "inlined_responses") or []:
            custom_id = (pick(item, "metadata") or {}).get("key")
            if custom_id:
                yield self._result(str(custom_id), item, latency, handle.tools)
        file_name = pick(dest, "file_name")
        if file_name:
            async for custom_id, item in self._file_items(str(file_name)):
                yield self._result(custom_id, item, latency, handle.tools)

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        """The job's answered responses and their total usage, not their answers; a
        responses file is read for its usage (the SDK has no Developer API counts)."""
        with self._translate_errors():
            job = await self._aio.batches.get(name=handle.id)
        dest = pick(job, "dest")
        items = list(pick(dest, "inlined_responses") or [])
        if pick(dest, "file_name"):
            items += [item async for _, item in self._file_items(str(pick(dest, "file_name")))]
        read = (self._result("", item, 0.0) for item in items)  # the answers are dropped
        used = [r.response.usage for r in read if r.response is not None]
        total = Usage()
        for u in used:
            total = total.plus(u)
        status = batch_status(job)
        if not used:
            return BilledWork(status, status.completed)
        return BilledWork(status, len(used), total)

    async def _file_items(self, file_name: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        fd, name = tempfile.mkstemp(prefix="agac-results-", suffix=".jsonl")
        os.close(fd)
        path = Path(name)
        try:
            with self._translate_errors():
                try:
                    await self._aio.files.download(file=file_name, destination=str(path))
                except TypeError:  # SDKs before ``destination``: the file arrives whole
                    data = await self._aio.files.download(file=file_name)
                    await asyncio.to_thread(path.write_bytes, data or b"")
            async for raw in read_lines(path):
                line = json.loads(raw)
                yield str(line.get("key")), line
        finally:
            path.unlink(missing_ok=True)

    def _result(
        self, custom_id: str, item: Any, latency_ms: float, offered: frozenset[str] = frozenset()
    ) -> Result:
        response = pick(item, "response")
        error = pick(item, "error") or pick(item, "status")
        if response is not None and not error:
            answer = content_response(
                response, latency_ms=latency_ms, service_tier="batch", offered=offered
            )
            return Result(custom_id, "succeeded", response=answer)
        return Result(custom_id, "errored", error=item_error(self.name, error))

    async def cancel_batch(self, handle: BatchHandle) -> None:
        with self._translate_errors():
            await self._aio.batches.cancel(name=handle.id)

    async def find_batch(self, key: str) -> BatchHandle | None:
        """The newest batch whose ``display_name`` is ``key`` (scans at most
        ``find_batch_scan`` batches, default 2000)."""
        seen = 0
        with self._translate_errors():
            pager = await self._aio.batches.list(config={"page_size": 100})
            async for job in pager:
                if pick(job, "display_name") == key:
                    return BatchHandle(self.name, str(job.name), key, {})
                seen += 1
                if seen >= self._scan_limit:
                    break
        return None

    async def aclose(self) -> None:
        await self._files.close(self._delete_file)  # the live calls' uploads
        if self._http is not None:
            await self._http.aclose()
        if self._sdk_client is not None:
            await self._sdk_client.aio.aclose()
            self._sdk_client.close()


def _httpx_transport() -> Any:
    """An httpx transport for the SDK's async calls.

    With aiohttp installed (the lean transport's ``http`` extra) google-genai switches
    its async calls to aiohttp, which resends a GET once when the connection drops: a
    retry behind the engine's back (docs/providers.md: the engine owns retries). Handing it an
    httpx transport keeps it on httpx, as without aiohttp.
    """
    try:
        return importlib.import_module("httpx2").AsyncHTTPTransport()
    except ImportError:  # older google-genai: httpx only
        return import_sdk("httpx", "gemini").AsyncHTTPTransport()


def api_version() -> str:
    """The API version in the path, chosen as the SDK chooses it for the Developer API:
    ``GOOGLE_GENAI_API_VERSION`` (``beta`` meaning ``v1beta``), else ``v1``."""
    chosen = os.environ.get("GOOGLE_GENAI_API_VERSION")
    return "v1beta" if chosen == "beta" else (chosen or DEFAULT_API_VERSION)


def model_path(model: str) -> str:
    """``models/<name>`` unless the name already says ``models/`` or ``tunedModels/``."""
    if model.startswith(("models/", "tunedModels/")):
        return model
    return f"models/{model}"


def _contents(
    request: Request,
    data: Callable[[Attachment], Any] | None = None,
    uris: Mapping[str, str] | None = None,
    *,
    cached: bool = False,
) -> list[dict[str, Any]]:
    """Chat turns in Gemini's form: roles ``user`` and ``model``. Attachments are
    ``inline_data`` parts with the raw bytes (the SDK's form) or, given ``data`` (each
    file's base64), the REST form ``inlineData``; those uploaded (their SHA-256 in
    ``uris``) are ``file_data`` parts. ``cached``: an explicit cache holds the first
    user message's static head, which is left out (a turn left empty goes)."""
    chat = request.chat
    if cached and request.cache is not None:
        first = first_user(chat)
        if first >= 0:
            rest = gemini_rest(chat[first], request.cache)
            kept = [rest] if rest.content or rest.attachments else []
            chat = [*chat[:first], *kept, *chat[first + 1 :]]
    out: list[dict[str, Any]] = []
    for m in chat:
        if is_tool_turn(m):
            turn = gemini_tool_content(m, out[-1] if out else None, rest=data is not None)
            out += [turn] if turn is not None else []
            continue
        out.append(
            {
                "role": "model" if m.role == "assistant" else "user",
                "parts": [{"text": m.content}]
                if not m.attachments
                else gemini_parts(
                    m.content,
                    m.attachments,
                    m.position,
                    data or read_verified,
                    rest=data is not None,
                    uris=uris,
                ),
            }
        )
    return out


def _explicit_cache(request: Request, *, native: bool) -> CacheHint | None:
    """The hint of a request that names an explicit cache, or None. Gemini refuses a
    system instruction beside ``cachedContent``, so a request whose system instruction
    the cache does not hold goes whole, without the cache: one asked in JSON mode (its
    instruction carries the schema) or one whose system prompt reads the record."""
    hint = request.cache
    if hint is None or not hint.name or (request.schema is not None and not native):
        return None
    if request.system and not hint.system:
        return None
    return hint


def _attachment_line(
    custom_id: str, request: Request, config: dict[str, Any], uris: Mapping[str, str] | None = None
) -> list[bytes | Attachment]:
    """A batch file line whose attachments' base64 is streamed in from their files (those
    in ``uris``, uploaded, are named by their URI)."""
    blobs = Blobs()
    return blobs.pieces(
        dump_line(
            {"key": custom_id, "request": wire_request(request, config, blobs.token, uris=uris)}
        )
    )


def wire_request(
    request: Request,
    config: dict[str, Any],
    data: Callable[[Attachment], str] = live_base64,
    *,
    uris: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A GenerateContentRequest in the REST (camelCase) form: the lean transport's body
    and a batch file's line (``data``: a placeholder per attachment there; ``uris``:
    the files uploaded through the Files API)."""
    apart = ("system_instruction", "cached_content", "service_tier", "tools")
    generation = {_camel(k): v for k, v in config.items() if k not in apart}
    cached = "cached_content" in config
    wire: dict[str, Any] = {
        "contents": _contents(request, data, uris, cached=cached),
        "generationConfig": generation,
    }
    if cached:
        wire["cachedContent"] = config["cached_content"]
    if "service_tier" in config:
        wire["serviceTier"] = config["service_tier"]
    if request.tools or request.web_search is not None:
        wire["tools"] = gemini_tools(request, rest=True)
    if "system_instruction" in config:
        # A plain-text instruction is a user-role Content, as the SDK makes it.
        wire["systemInstruction"] = {
            "parts": [{"text": config["system_instruction"]}],
            "role": "user",
        }
    return wire


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _span_ms(start: Any, end: Any) -> float:
    if isinstance(start, datetime) and isinstance(end, datetime):
        return max(0.0, (end - start).total_seconds() * 1000.0)
    return 0.0


def _cache_gone(exc: Any) -> bool:
    """Does this APIError say the cache named is not there (any more)?"""
    return exc.code == 404 or (exc.code == 403 and "not found" in str(exc.message or "").lower())


def _cache_gone_error(err: ProviderError) -> bool:
    """Does a failed call say the cache it named is not there (any more)?"""
    text = str(err).lower()
    return err.status == 404 or (err.status == 403 and "cachedcontent not found" in text)


def _schema_rejected(err: ProviderError) -> bool:
    return err.status == 400 and bool(_SCHEMA_REJECTED.search(str(err)))
