"""The provider contract (docs/providers.md): normalized types and the ``Provider`` protocol.

Adapters translate between these types and one provider's wire protocol: batch and
file calls through its official SDK, online calls through agac's lean HTTP client or
the SDK (``ProviderSettings.transport``, P1). They know nothing of runs, the
store or the engine. Every SDK exception and every error answer is translated at the
adapter boundary into the taxonomy of :mod:`agac.errors` (``WaitError``,
``RetryableError``, ``FatalError``, ``UnsupportedError``) and re-raised ``from`` its
cause. SDK built-in retries are turned off and the lean transport never retries: the
engine owns retries.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from agac.jsontext import canonical, loads
from agac.media import Attachment, AttachmentLimits
from agac.providers.servertools import Citation, WebSearch, server_tool_counts
from agac.providers.spec import ProviderSpec, Transport

__all__ = [
    "TRANSPORTS",
    "Attachment",
    "AttachmentLimits",
    "BatchApi",
    "BatchHandle",
    "BatchStatus",
    "BilledWork",
    "CacheHint",
    "ChoosesBatch",
    "Leg",
    "Message",
    "Provider",
    "ProviderSettings",
    "ProviderSpec",
    "Request",
    "Response",
    "Result",
    "StopReason",
    "StoredRequests",
    "SupportsBatch",
    "SupportsBatchCandidates",
    "SupportsBatchQuota",
    "SupportsContinue",
    "ToolCall",
    "ToolDef",
    "Transport",
    "Usage",
    "batch_api",
    "canonical_json",
    "fingerprint_of",
    "server_tool_counts",
    "stored_request",
]

StopReason = Literal[
    "end", "max_tokens", "refusal", "content_filter", "unexpected", "paused", "tool_use"
]
"""Normalized stop reasons, read by :func:`agac.providers.stops.read_stop`. Only ``end``
is an answer; ``tool_use`` is a turn that calls tools the request offered
(:attr:`Response.tool_calls`), which the engine's tool loop answers. ``max_tokens`` is every provider's truncation value (OpenAI/Groq/Ollama
``length``, Gemini ``MAX_TOKENS``, Anthropic ``max_tokens`` and
``model_context_window_exceeded``); ``unexpected`` is a stop value agac does not know or
a tool call the action did not ask for; ``paused`` is a turn the provider paused
(Anthropic ``pause_turn``) that has not been continued."""


TRANSPORTS: tuple[Transport, ...] = ("lean", "sdk")


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the form hashed into fingerprints."""
    return canonical(value)


_ATTACHMENTS = '"attachments":['
"""How a message with attachments starts its attachment list in canonical JSON. A prompt
cannot contain it raw: a quote inside a JSON string is written ``\\"``."""


def fingerprint_of(canonical: str) -> str:
    """The request fingerprint of a request's canonical JSON (see ``Request.canonical``).

    An attachment enters it by its media type and SHA-256 only (:meth:`Attachment.hashed`):
    where the file lies, its name and what was read from it to estimate tokens do not
    change an answer, so the same bytes found under another path are the same request."""
    if _ATTACHMENTS in canonical:
        data = loads(canonical)
        for m in data.get("messages") or ():
            if isinstance(m, dict) and m.get("attachments"):
                m["attachments"] = [Attachment.hashed(a) for a in m["attachments"]]
        canonical = canonical_json(data)
    return hashlib.sha256(canonical.encode()).hexdigest()


AttachmentPosition = Literal["before", "after"]

CacheMode = Literal["off", "auto", "on"]
"""An action's ``cache:``: ``off`` asks for no caching, ``auto`` (the default) marks a
static prefix long enough for the model's cache minimum, ``on`` marks it whatever its
length (docs/providers.md, Prompt caching)."""


@dataclass(frozen=True, slots=True)
class CacheHint:
    """How one request asks the provider to cache its static prefix.

    The static prefix is the system prompt (when ``system`` is True: it reads no record
    field) and then the first ``static_chars`` characters of the first user message: the
    action's ``context_prefix`` and the prompt template's literal head, which are the same
    for every record of the action in a run. ``prefix_tokens`` estimates that prefix's
    tokens; ``mode`` is ``auto`` or ``on`` (a request under ``cache: off`` carries no
    hint). ``ttl`` is ``5m`` or ``1h`` (Anthropic's cache lifetimes). ``key`` is the
    routing key every request sharing the prefix sends (OpenAI ``prompt_cache_key``: a hash
    of the workflow, the action and the prefix). ``name`` is an explicit cache the run
    created for the prefix (Gemini ``cachedContents/…``): the request then sends only what
    follows the prefix and names the cache.

    A hint changes what is sent, never the answer: it is not part of the request's
    canonical form or its fingerprint, so turning caching on or off reuses stored answers.
    """

    mode: CacheMode = "auto"
    ttl: Literal["5m", "1h"] = "5m"
    system: bool = True
    static_chars: int = 0
    prefix_tokens: int = 0
    key: str | None = None
    name: str | None = None

    def split(self, text: str) -> tuple[str, str]:
        """The first user message's text as (static prefix, the rest)."""
        n = min(max(self.static_chars, 0), len(text))
        return text[:n], text[n:]


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A function the model may call: its name, what it is for, and the JSON Schema of
    its arguments (an object). Part of the request's canonical form."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolDef:
        return cls(d["name"], d["description"], d["parameters"])


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call a model turn asks for: the provider's id of the call (its result is sent
    back under it), the tool's name and its arguments as the JSON text the model wrote.
    ``signature``: an opaque token the provider gave with the call (Gemini's
    ``thoughtSignature``, base64 text), sent back unchanged with the turn."""

    id: str
    name: str
    arguments: str
    signature: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.signature is not None:
            out["signature"] = self.signature
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        signature = d.get("signature")
        return cls(
            str(d["id"]),
            str(d["name"]),
            str(d["arguments"]),
            str(signature) if signature is not None else None,
        )


@dataclass(frozen=True, slots=True)
class Message:
    """One turn. A user turn may carry attachments (files sent with its text), placed
    ``before`` (the default) or ``after`` the text. In a tool loop an ``assistant`` turn
    may carry the ``tool_calls`` it asked for, and a ``tool`` turn is one call's result
    (``content``) sent back under its ``tool_call_id``, naming the tool (``name``). An
    ``assistant`` turn the provider paused (Anthropic ``pause_turn``) carries its content
    blocks as the provider sent them (``paused``), sent back as they are to continue it."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    attachments: tuple[Attachment, ...] = ()
    position: AttachmentPosition = "before"
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    paused: tuple[Any, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The message in a canonical request: a message without attachments or tool
        parts is exactly ``{"content", "role"}``, as before they existed (its fingerprint
        stays)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.attachments:
            out["position"] = self.position
            out["attachments"] = [a.to_dict() for a in self.attachments]
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
            out["name"] = self.name
        if self.paused:
            out["paused"] = list(self.paused)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Message:
        atts = d.get("attachments")
        return cls(
            d["role"],
            d["content"],
            tuple(Attachment.from_dict(a) for a in atts) if atts else (),
            d.get("position", "before"),
            tuple(ToolCall.from_dict(c) for c in d.get("tool_calls") or ()),
            d.get("tool_call_id"),
            d.get("name"),
            tuple(d.get("paused") or ()),
        )


@dataclass(frozen=True, slots=True)
class Request:
    """One model request, provider-neutral.

    ``model`` is the provider-local model name (``gpt-4o-mini``, not
    ``openai/gpt-4o-mini``). ``messages`` holds the system prompt first (role
    ``system``) when there is one. ``schema`` is the JSON Schema the answer must
    satisfy; adapters send it in the provider's native structured-output form and
    fall back to prompting where a model cannot take one. ``seed`` is the fan-out
    version index where supported. ``custom_id`` names the request inside a batch
    (``^[a-zA-Z0-9_-]{1,64}$``).
    """

    provider: str
    model: str
    messages: tuple[Message, ...]
    max_tokens: int = 1024
    temperature: float | None = None
    schema: dict[str, Any] | None = None
    timeout: float | None = None
    seed: int | None = None
    custom_id: str | None = None
    cache: CacheHint | None = None
    options: tuple[tuple[str, Any], ...] = ()
    tier: Literal["flex"] | None = None
    tools: tuple[ToolDef, ...] = ()
    """The functions the model may call (an action's ``tools:``); none: it may call none."""
    web_search: WebSearch | None = None
    """The provider's web search, offered with ``tools: [web_search]`` (None: not offered)."""

    @property
    def ledger_tier(self) -> Literal["live", "flex"]:
        """The tier a live call of this request is billed and ledgered at."""
        return "flex" if self.tier == "flex" else "live"

    @property
    def system(self) -> str | None:
        for m in self.messages:
            if m.role == "system":
                return m.content
        return None

    @property
    def chat(self) -> list[Message]:
        """The messages without the system prompt."""
        return [m for m in self.messages if m.role != "system"]

    def canonical(self) -> str:
        """The request as canonical JSON: what is hashed into the fingerprint and stored
        with the answer. Not timeout, custom_id or cache: they do not change an answer."""
        return canonical_json(self.to_dict())

    def fingerprint(self) -> str:
        """Hash of everything that determines an answer (docs/getting-started.md)."""
        return fingerprint_of(self.canonical())

    @property
    def attachments(self) -> tuple[Attachment, ...]:
        """Every attachment of the request, in message order."""
        return tuple(a for m in self.messages for a in m.attachments)

    def to_dict(self) -> dict[str, Any]:
        """The canonical form's fields: a request without ``options`` has exactly the
        fields it had before options existed (its fingerprint stays)."""
        out = {
            "provider": self.provider,
            "model": self.model,
            "messages": [m.to_dict() for m in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "schema": self.schema,
            "seed": self.seed,
        }
        if self.options:
            out["options"] = dict(self.options)
        if self.tools:
            out["tools"] = [t.to_dict() for t in self.tools]
        if self.web_search is not None:
            out["web_search"] = self.web_search.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage, normalized: ``input_tokens`` excludes cached reads and cache writes.

    OpenAI and Gemini include cached tokens in their prompt count, so adapters
    subtract them; Anthropic already excludes both and reports cache writes apart.
    ``reasoning_tokens`` (OpenAI ``reasoning_tokens``, Gemini ``thoughtsTokenCount``,
    Anthropic ``thinking_tokens``) are a part of ``output_tokens``, billed as output and
    shown apart. ``server_tools`` counts the provider's own tool calls it bills per use,
    as ``(name, count)`` pairs sorted by name (Anthropic ``server_tool_use``: ``web_search``,
    ``web_fetch``, …; Gemini's grounding searches as ``web_search``).
    ``cache_write_1h_tokens`` are the part of ``cache_write_tokens`` written to live an
    hour (Anthropic ``cache_creation.ephemeral_1h_input_tokens``), billed at the 1-hour
    write rate.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    server_tools: tuple[tuple[str, int], ...] = ()
    cache_write_1h_tokens: int = 0

    def plus(self, other: Usage) -> Usage:
        """Both usages together (the legs of one continued turn)."""
        tools = dict(self.server_tools)
        for name, n in other.server_tools:
            tools[name] = tools.get(name, 0) + n
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            server_tool_counts(tools),
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }
        if self.server_tools:
            out["server_tools"] = dict(self.server_tools)
        if self.cache_write_1h_tokens:
            out["cache_write_1h_tokens"] = self.cache_write_1h_tokens
        return out


def stored_request(
    text: str, custom_id: str | None = None, cache: CacheHint | None = None
) -> Request:
    """A stored canonical request (``Request.canonical()``) back as a Request, with the
    cache hint of its action (the canonical form holds none)."""
    d = loads(text)
    return Request(
        provider=d["provider"],
        model=d["model"],
        messages=tuple(Message.from_dict(m) for m in d["messages"]),
        max_tokens=d["max_tokens"],
        temperature=d.get("temperature"),
        schema=d.get("schema"),
        seed=d.get("seed"),
        custom_id=custom_id,
        cache=cache,
        options=tuple(sorted((d.get("options") or {}).items())),
        tools=tuple(ToolDef.from_dict(t) for t in d.get("tools") or ()),
        web_search=WebSearch.from_dict(d["web_search"]) if "web_search" in d else None,
    )


class StoredRequests:
    """A batch's requests as the store holds them: ``(custom_id, canonical JSON)`` pairs,
    streamed once. Iterating gives each as a :class:`Request` (what every adapter's
    ``submit_batch`` takes); an adapter that writes its lines from the stored text reads
    :attr:`pairs` instead and skips the decoding. ``cache`` is the cache hint of the
    batch's action (one action per batch): every request of the batch carries it."""

    __slots__ = ("cache", "pairs")

    def __init__(self, pairs: Iterable[tuple[str, str]], cache: CacheHint | None = None) -> None:
        self.pairs = pairs
        self.cache = cache

    def __iter__(self) -> Iterator[Request]:
        for custom_id, text in self.pairs:
            yield stored_request(text, custom_id, self.cache)


@dataclass(frozen=True, slots=True)
class Leg:
    """One earlier call of a turn the provider paused and agac continued (Anthropic
    ``pause_turn``): what it used, how long it took, how it stopped. Each is a call of
    its own in the cost ledger."""

    usage: Usage
    latency_ms: float = 0.0
    request_id: str | None = None
    raw_stop: str = ""
    service_tier: str | None = None


@dataclass(frozen=True, slots=True)
class Response:
    """A normalized model answer. ``parsed`` is the JSON value when the text parses.

    ``raw_stop`` is the provider's own stop value and ``stop_detail`` what it said about
    the stop (a refusal's category and explanation, a filter's safety category, the raw
    value of an unexpected stop). ``paused`` is the content of a paused turn as the
    provider sent it, for the adapter that continues it (``stop_reason == "paused"``).
    ``billed_usd`` is what the provider says the call cost (OpenRouter ``usage.cost``): the
    ledger takes it instead of pricing the usage; ``served_by`` the upstream provider a
    router sent the call to (OpenRouter ``provider``), kept in the ledger.
    """

    text: str
    model: str
    stop_reason: StopReason = "end"
    usage: Usage = field(default_factory=Usage)
    parsed: Any = None
    service_tier: str | None = None
    latency_ms: float = 0.0
    refusal: str | None = None
    raw_stop: str = ""
    stop_detail: str | None = None
    paused: Any = None
    legs: tuple[Leg, ...] = ()
    request_id: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    """The calls a ``tool_use`` turn asks for, in the order the model wrote them."""
    billed_usd: float | None = None
    served_by: str | None = None
    citations: tuple[Citation, ...] = ()
    """The sources the answer cites from the provider's web search, in order, each once."""

    @property
    def total_usage(self) -> Usage:
        """The usage of every leg of the turn, this one included."""
        total = self.usage
        for leg in self.legs:
            total = total.plus(leg.usage)
        return total


@dataclass(frozen=True, slots=True)
class BatchHandle:
    """Names one provider batch. ``id`` is what the provider's SDK takes back
    (Gemini: the full ``batches/<id>`` name). ``key`` is our idempotency key. ``tools``
    is given by the engine when it reads results (never stored with the batch)."""

    provider: str
    id: str
    key: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    tools: frozenset[str] = frozenset()
    """The functions every request of the batch offers (one action per batch): a result
    calling only those is a tool turn (``tool_use``), read as the live call reads it."""


BatchState = Literal["running", "cancelling", "ended", "failed", "expired", "cancelled"]


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """``state`` is normalized; ``raw_status`` is the provider's own word.

    ``ended`` means results can be read. ``cancelled`` means cancelled before
    finishing (nothing to read) -- except Anthropic, whose canceled batches end with a
    result per request and are reported ``ended``. A status no mapping knows is
    ``running`` (B9) with the raw word kept.
    """

    state: BatchState
    raw_status: str
    request_count: int = 0
    completed: int = 0
    failed: int = 0
    known: bool = True


@dataclass(frozen=True, slots=True)
class BilledWork:
    """What a provider answered, and bills, in a batch agac does not read (B7, a batch
    given up), as the batch itself reports it — no answer is taken: ``answered``
    requests, and their total ``usage`` when the provider reports it (OpenAI's batch
    ``usage``, Gemini's responses; None: agac estimates it).
    ``status`` is the batch's status when asked."""

    status: BatchStatus
    answered: int = 0
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class Result:
    """One item of a finished batch. A custom_id missing from results is *not returned*."""

    custom_id: str
    type: Literal["succeeded", "errored", "canceled", "expired"]
    response: Response | None = None
    error: Exception | None = None


@dataclass(frozen=True)
class ProviderSettings:
    """What a provider needs to start: base URL, API key, extra options from agac.yml.

    ``transport`` is how online calls travel (P1): ``lean`` (the default,
    agac's own HTTP client) or ``sdk`` (the official SDK); batch and file calls always
    go through the SDK. ``connections`` bounds the lean transport's open connections
    (0: its default); the engine passes the summed ``max_concurrency`` of the actions
    that use the provider. ``batch`` says the run may send batches to it: the adapter
    then loads its SDK at once rather than at the first batch call, so that a paced
    submission is not held up between its slot and its send.
    """

    name: str
    base_url: str | None = None
    api_key: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    transport: Transport = "lean"
    connections: int = 0
    batch: bool = False


@runtime_checkable
class Provider(Protocol):
    """One provider behind the contract. Built-ins and plugins register under the
    entry point group ``agac.providers`` with the class as the value.

    Its class attribute ``spec`` (:class:`~agac.providers.spec.ProviderSpec`) says what
    it is and can do; validation and the engine read the spec, never the object, and
    reading it loads no SDK. The batch methods below work when ``spec.batch`` is set.

    ``batch_results`` fetches the batch first and reads nothing unless it has ended
    (:func:`~agac.providers._common.ended_or_raise`, B7). ``billed_work`` tells what
    the provider bills in a batch agac gives up or cannot read, without taking its
    answers.
    """

    spec: ProviderSpec

    @property
    def name(self) -> str: ...

    async def complete(self, request: Request) -> Response: ...

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle: ...

    async def poll_batch(self, handle: BatchHandle) -> BatchStatus: ...

    def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]: ...

    async def billed_work(self, handle: BatchHandle) -> BilledWork: ...

    async def cancel_batch(self, handle: BatchHandle) -> None: ...

    async def find_batch(self, key: str) -> BatchHandle | None: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class SupportsBatch(Protocol):
    """A provider whose batch API works (``spec.batch`` set): the batch half of the
    contract. Its per-batch limits are in ``spec.batch``."""

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle: ...

    async def poll_batch(self, handle: BatchHandle) -> BatchStatus: ...

    def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]: ...

    async def cancel_batch(self, handle: BatchHandle) -> None: ...

    async def find_batch(self, key: str) -> BatchHandle | None: ...

    async def billed_work(self, handle: BatchHandle) -> BilledWork: ...


@runtime_checkable
class SupportsContinue(Protocol):
    """A provider whose turns may come back paused (``stop_reason == "paused"``,
    Anthropic ``pause_turn``) and that continues one: the paused content goes back as the
    assistant turn, live, for a bounded number of legs. A paused batch answer is
    continued live through it; the answer it returns carries the live legs before it."""

    async def continue_turn(self, request: Request, paused: Response) -> Response: ...


@runtime_checkable
class SupportsBatchCandidates(Protocol):
    """A batch API that cannot find a batch by our key (no metadata on its batches:
    Anthropic) and lists the candidates a lost submission may be instead: batches created
    in a time window with a given request count (B2 recovery adopts exactly one)."""

    async def batch_candidates(
        self,
        *,
        created_after: float | None,
        created_before: float | None = None,
        request_count: int | None = None,
    ) -> list[BatchHandle]: ...


@runtime_checkable
class SupportsBatchQuota(Protocol):
    """A batch API whose records per batch are account quotas the user may have had
    raised or lowered (Bedrock's jobs: at least 100, at most 50,000 by default):
    ``min_records`` and ``max_records`` as configured, and what the user wants done with
    a file below the minimum: sent ``live``, or held (``wait``)."""

    min_records: int
    max_records: int
    below_minimum: Literal["live", "wait"]


@dataclass(frozen=True, slots=True)
class BatchApi:
    """What a run may do with a provider's batches, found once when the run is assembled:
    the API itself, its per-batch limits, and how a lost submission is looked for."""

    api: SupportsBatch
    max_requests: int
    max_bytes: int
    candidates: SupportsBatchCandidates | None
    """Set when batches are found by time window and count, not by our key (B2)."""
    attachment_max_bytes: int = 0
    """The bytes of one batch part whose requests attach files: ``max_bytes``, or less
    for a batch API that takes its requests in one call (the part is held in memory)."""
    attachment_line_bytes: Callable[[tuple[Attachment, ...], int], int] | None = None
    """What a request's attachments add to its batch line, given them and the bytes of
    its text, when not all their base64 goes in it (Gemini names files over its inline
    limit by their upload); None: each attachment's base64."""
    min_requests: int = 1
    """The fewest requests one batch may hold (Bedrock: 100): parts are balanced so that
    none falls below it, and a file with fewer goes as ``below_minimum`` says."""
    below_minimum: Literal["live", "wait"] = "live"


@runtime_checkable
class ChoosesBatch(Protocol):
    """A provider whose batch API is used only when its settings choose it (vLLM's offline
    ``run-batch`` executor, ``providers: {vllm: {batch: run-batch}}``); otherwise its batch
    actions run as live calls, as its spec's ``local_batch`` says."""

    @property
    def batch_chosen(self) -> bool: ...


def batch_api(provider: Provider | None) -> BatchApi | None:
    """The provider's batch capability, or None when its spec declares no batch API (the
    mock; Ollama, which runs batch actions live) or its settings did not choose it
    (:class:`ChoosesBatch`)."""
    if provider is None or not isinstance(provider, SupportsBatch):
        return None
    if isinstance(provider, ChoosesBatch) and not provider.batch_chosen:
        return None
    batch = provider.spec.batch
    if batch is None:
        return None
    least, most, below = batch.min_requests, batch.max_requests, "live"
    if isinstance(provider, SupportsBatchQuota):
        least, most, below = provider.min_records, provider.max_records, provider.below_minimum
    return BatchApi(
        api=provider,
        max_requests=most,
        max_bytes=batch.max_bytes,
        candidates=provider
        if batch.find == "window" and isinstance(provider, SupportsBatchCandidates)
        else None,
        attachment_max_bytes=batch.attachment_max_bytes or batch.max_bytes,
        attachment_line_bytes=batch.attachment_line_bytes,
        min_requests=least,
        below_minimum="wait" if below == "wait" else "live",
    )
