"""Ollama (``pip install -e '.[ollama]'``), on agac's lean transport or, with
``transport: sdk``, the official ``ollama`` SDK.

Live calls use ``/api/chat`` with ``format`` set to the JSON Schema (structured
output); a model that rejects it (a 400 naming ``format``) falls back to
``format: "json"`` with the schema in the system prompt. The host comes from
agac.yml, else ``OLLAMA_HOST`` (read as the SDK reads it: :func:`parse_host`); no key
is needed (``OLLAMA_API_KEY`` is sent as a Bearer token when set, for Ollama Cloud,
as the SDK does). With ``tools: [web_search]`` the model is offered a ``web_search``
function that agac runs against Ollama's web search API (:meth:`OllamaProvider.search_web`,
_ollama_search.py): the engine's tool loop makes each call a turn.

Ollama has no batch API: its spec declares none and the batch methods raise
UnsupportedError; the spec's ``local_batch`` says the engine runs an Ollama batch action locally
with bounded concurrency (the run's notes say so). The SDK has no retries and no per-call timeout, so on the SDK transport
the request timeout is enforced around the call. Ollama reports no cached tokens.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from agac.errors import FatalError, ProviderError, RetryableError, UnsupportedError
from agac.media import read_verified
from agac.providers._attachments import OLLAMA_LIMITS, live_base64
from agac.providers._common import (
    as_int,
    fallback_system,
    parse_json,
    pick,
    stopwatch,
)
from agac.providers._errors import classify
from agac.providers._ollama_search import DEFAULT_URL, KEY_ENV, URL_ENV, OllamaWebSearch
from agac.providers._reasoning import reasoning_share, split_reasoning, thinks_inline
from agac.providers._tool_wire import (
    is_tool_turn,
    offered,
    ollama_calls,
    ollama_tool_message,
    ollama_tools,
)
from agac.providers.adapter import ProviderBase
from agac.providers.base import (
    TRANSPORTS,
    BatchHandle,
    BatchStatus,
    BilledWork,
    Message,
    ProviderSettings,
    Request,
    Response,
    Result,
    Usage,
)
from agac.providers.options import Option, structured_output
from agac.providers.servertools import SearchHit
from agac.providers.spec import ProviderSpec, WebSearchSpec
from agac.providers.stops import read_stop

__all__ = ["OllamaProvider"]

DEFAULT_PORT = 11434
_SCHEMA_REJECTED = re.compile(r"\bformat\b|schema", re.IGNORECASE)
_THINK_REJECTED = re.compile(r"\bthink(?:ing)?\b", re.IGNORECASE)


class OllamaProvider(ProviderBase):
    """Ollama's native chat API; no batch API."""

    spec = ProviderSpec(
        name="ollama",
        extra="ollama",
        sdk_module="ollama",
        transports=TRANSPORTS,
        #: ``run_mode: batch`` runs locally as live calls (the one documented exception).
        local_batch=True,
        cache_kinds=("implicit",),
        #: Images only (the message's ``images``), on a vision model.
        attachments=OLLAMA_LIMITS,
        vision=True,
        #: ``tools`` on ``/api/chat``; calls come as ``message.tool_calls``.
        function_tools=True,
        #: Ollama's models search through Ollama's web search API, which agac runs as a
        #: ``web_search`` function of the record's loop (_ollama_search.py).
        web_search=WebSearchSpec(
            "Ollama's web search API (run by agac as a web_search function tool)",
            options=("max_uses", "allowed_domains", "blocked_domains"),
            in_loop=True,
            key_env=KEY_ENV,
        ),
        #: ``providers: ollama:`` in agac.yml. (No ``timeout``: Ollama has no batch or
        #: file calls, and a live call is timed by its action's ``timeout``.)
        options=(
            structured_output("json_mode", "JSON mode with the schema in the prompt"),
            Option(
                "web_search_url",
                "text",
                "the endpoint of Ollama's web search API that an action's web searches "
                f"go to (else {URL_ENV})",
                default=DEFAULT_URL,
            ),
        ),
    )
    base_url_env = "OLLAMA_HOST"

    def __init__(self, settings: ProviderSettings) -> None:
        super().__init__(settings)
        self._no_schema: set[str] = set()
        # Models seen to reject ``think``: their reasoning is split from the content.
        self._no_think: set[str] = set()
        self._force_json_mode = settings.options.get("structured_output") == "json_mode"
        self._search = OllamaWebSearch(settings)

    @property
    def _host(self) -> str | None:
        return self._base_url

    def _lean_headers(self) -> dict[str, str]:
        # As the SDK: a Bearer token only when OLLAMA_API_KEY is set (Ollama Cloud).
        key = os.environ.get("OLLAMA_API_KEY")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _lean_timeout(self) -> float | None:
        return None  # no batch or file calls: a live call is timed by its action

    def _open_lean(self) -> None:
        self._chat_url = parse_host(self._base_url) + "/api/chat"

    def _make_client(self) -> Any:
        return self._sdk.AsyncClient(host=self._base_url)

    def _status_error(
        self, status: int, headers: Mapping[str, str], body: Any, text: str
    ) -> ProviderError:
        """A non-2xx answer, read as the SDK's ResponseError reads it: the body's
        ``error`` field, else its text. The SDK keeps no headers, so no retry hint."""
        message = body.get("error", text) if isinstance(body, dict) else text
        return classify(self.name, status if status > 0 else None, message=str(message))

    def _sdk_error(self, exc: Exception) -> ProviderError | None:
        """Ollama answers 503 when its queue is full; it sends no Retry-After."""
        if isinstance(exc, self._sdk.ResponseError):
            status = exc.status_code if exc.status_code > 0 else None
            return classify(self.name, status, message=str(exc.error))
        return None

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        return (self._sdk.RequestError,)

    def _params(self, request: Request, *, native: bool) -> dict[str, Any]:
        messages = [_message(m, sdk=self._http is None) for m in request.messages]
        options: dict[str, Any] = {"num_predict": request.max_tokens}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.seed is not None:
            options["seed"] = request.seed
        params: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "options": options,
            "stream": False,
        }
        if request.tools:
            params["tools"] = ollama_tools(request)
        if thinks_inline(request.model) and request.model not in self._no_think:
            # The reasoning in ``message.thinking``, not as ``<think>`` in the content.
            params["think"] = True
        if request.schema is not None:
            if native:
                params["format"] = request.schema
            else:
                system = {"role": "system", "content": fallback_system(request)}
                params["messages"] = [system] + [m for m in messages if m["role"] != "system"]
                params["format"] = "json"
        return params

    async def complete(self, request: Request) -> Response:
        """One live chat. A model that rejects ``format`` (a 400 naming it) is asked again
        in JSON mode, one that rejects ``think`` is asked again without it (its reasoning
        then comes inline and is split off); both are remembered."""
        native = not self._force_json_mode and request.model not in self._no_schema
        try:
            return await self._chat(request, native=native)
        except FatalError as err:
            if _think_rejected(err) and request.model not in self._no_think:
                self._no_think.add(request.model)
                return await self.complete(request)
            if request.schema is None or not native or not _schema_rejected(err):
                raise
            self._no_schema.add(request.model)
            return await self._chat(request, native=False)

    async def _chat(self, request: Request, *, native: bool) -> Response:
        params = self._params(request, native=native)
        parse = request.schema is not None
        if self._http is not None:
            with stopwatch() as took:
                body = await self._http.post(
                    self._chat_url, params, errors=self._status_error, timeout=request.timeout
                )
            return chat_response(body, latency_ms=took[0], parse=parse, offered=offered(request))
        timeout = request.timeout
        with self._translate_errors(), stopwatch() as took:
            async with asyncio.timeout(float(timeout) if timeout else None):
                answer = await self._client.chat(**params)
        return chat_response(answer, latency_ms=took[0], parse=parse, offered=offered(request))

    async def search_web(
        self, query: str, max_results: int, timeout: float | None
    ) -> tuple[SearchHit, ...]:
        """One search of Ollama's web search API, for a model's ``web_search`` call."""
        return await self._search.search(query, max_results, timeout)

    async def aclose(self) -> None:
        await self._search.aclose()
        await super().aclose()

    # Ollama has no batch API (docs/providers.md): the engine runs its batches locally.

    def _no_batch(self) -> UnsupportedError:
        return UnsupportedError(
            "ollama has no batch API; agac runs ollama batch actions locally",
            code="batch_unsupported",
        )

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        raise self._no_batch()

    async def poll_batch(self, handle: BatchHandle) -> BatchStatus:
        raise self._no_batch()

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        raise self._no_batch()
        yield  # pragma: no cover - makes this an async generator like the others

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        raise self._no_batch()

    async def cancel_batch(self, handle: BatchHandle) -> None:
        raise self._no_batch()

    async def find_batch(self, key: str) -> BatchHandle | None:
        raise self._no_batch()


def chat_response(
    answer: Any, *, latency_ms: float, parse: bool = True, offered: frozenset[str] = frozenset()
) -> Response:
    """Normalize an Ollama ChatResponse per docs/providers.md on both transports (``length`` is
    truncation; the stop is read by :func:`read_stop`). Reasoning — ``message.thinking``,
    or a leading ``<think>`` block of the content — stays out of the answer and counts as
    reasoning tokens. A ``tool_calls`` entry of a function the request did not offer
    (``offered``) is a tool call nobody asked for; a turn calling only offered functions
    (Ollama ends it with ``stop``) is ``tool_use``, its calls in
    :attr:`Response.tool_calls`. An answer
    with no ``message`` (another endpoint's body, a proxy's) is not an answer: retryable,
    like a body that is not JSON."""
    message = pick(answer, "message")
    if message is None:
        raise RetryableError(
            f"ollama: the answer has no message, not a chat answer: {str(answer)[:200]}"
        )
    split = split_reasoning(pick(message, "content") or "", pick(message, "thinking"))
    text = split.answer
    asked = pick(message, "tool_calls")
    calls = ollama_calls(asked) if offered and asked else ()
    stop = read_stop(
        "ollama",
        pick(answer, "done_reason"),
        tool_call=_tool_call(asked),
        offered=bool(calls) and all(c.name in offered for c in calls),
    )
    output = as_int(pick(answer, "eval_count"))
    return Response(
        text=text,
        model=str(pick(answer, "model") or ""),
        stop_reason=stop.reason,
        raw_stop=stop.raw,
        stop_detail=stop.detail,
        usage=Usage(
            input_tokens=as_int(pick(answer, "prompt_eval_count")),
            output_tokens=output,
            reasoning_tokens=reasoning_share(split, output, 0),
        ),
        parsed=parse_json(text) if parse and stop.reason == "end" else None,
        latency_ms=latency_ms,
        tool_calls=calls if stop.reason == "tool_use" else (),
    )


def parse_host(host: str | None) -> str:
    """The server's root URL from ``OLLAMA_HOST`` or agac.yml, read as the SDK reads it:
    scheme ``http`` unless given, port 11434 unless given (80/443 with an explicit
    scheme), an optional path kept without its trailing slash."""
    host = (host or "").strip()
    scheme, sep, rest = host.partition("://")
    if not sep:
        scheme, rest = "http", host
    default_port = {"http": 80, "https": 443}[scheme] if sep else DEFAULT_PORT
    hostport, _, path = rest.partition("/")
    if hostport.startswith("["):  # an IPv6 literal
        name, _, tail = hostport[1:].partition("]")
        name, port_text = f"[{name}]", tail.removeprefix(":")
    else:
        name, _, port_text = hostport.partition(":")
    port = int(port_text) if port_text else default_port
    root = f"{scheme}://{name or '127.0.0.1'}:{port}"
    path = path.rstrip("/")
    return f"{root}/{path}" if path else root


def _schema_rejected(err: ProviderError) -> bool:
    return err.status == 400 and bool(_SCHEMA_REJECTED.search(str(err)))


def _think_rejected(err: ProviderError) -> bool:
    """A 400 naming thinking: the model does not support ``think``."""
    return err.status == 400 and bool(_THINK_REJECTED.search(str(err)))


def _tool_call(calls: Any) -> str | None:
    """The name of the first tool a message calls (``tool_calls``), or None."""
    for call in calls or ():
        return str(pick(call, "function", "name") or "")
    return None


def _message(m: Message, *, sdk: bool) -> dict[str, Any]:
    """A chat message; its images as the ``images`` list — base64 on the wire, the bytes
    themselves for the SDK (whose ``Image`` would take a long string for a path); a tool
    loop's turn in Ollama's form."""
    if is_tool_turn(m):
        return ollama_tool_message(m)
    if not m.attachments:
        return {"role": m.role, "content": m.content}
    images = [read_verified(a) if sdk else live_base64(a) for a in m.attachments]
    return {"role": m.role, "content": m.content, "images": images}
