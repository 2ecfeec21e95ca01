"""What a provider is and can do, declared once per adapter (docs/providers.md, Provider
specs): a frozen :class:`ProviderSpec` in the adapter class's ``spec`` attribute.

Validation, planning and the engine ask the spec — never the adapter object — whether a
provider has a batch API and how it takes a batch's requests, which online transports
and tiers it offers, what it caches and from how many tokens, which files it takes, and
which options it accepts under ``providers: <name>:`` in ``agac.yml`` and under an
action's ``provider_options:``. A plugin registered under the ``agac.providers`` entry
point declares its spec the same way, so it is judged by the same rules. Reading a spec
imports no SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from agac.media import Attachment, AttachmentLimits
from agac.providers.options import Option

__all__ = [
    "BatchInput",
    "BatchSpec",
    "CacheKind",
    "FlexSpec",
    "ProviderSpec",
    "Transport",
    "WebSearchOption",
    "WebSearchSpec",
]

Transport = Literal["lean", "sdk"]
"""How an adapter sends online calls (P1): ``lean``, agac's own HTTP client
(the default), or ``sdk``, the provider's official SDK."""

BatchInput = Literal["file", "inline", "inline_or_file"]
"""How a batch's requests reach the provider: an uploaded JSONL ``file`` (OpenAI, Groq,
Azure), ``inline`` in the create call (Anthropic), or either (Gemini)."""

CacheKind = Literal["marker", "routing_key", "explicit", "implicit"]
"""How a provider caches a prompt prefix: ``marker`` (the request marks the prefix:
Anthropic ``cache_control``), ``routing_key`` (a key routes requests sharing a prefix to
one cache: OpenAI ``prompt_cache_key``), ``explicit`` (a cache created ahead and named by
the request: Gemini ``cachedContents``) or ``implicit`` (the provider caches on its own)."""


@dataclass(frozen=True, slots=True)
class BatchSpec:
    """A provider's batch API: how it takes the requests, and its per-batch limits (the
    engine splits a shard above them). ``attachment_max_bytes`` is the bytes of one batch
    part whose requests attach files when less than ``max_bytes`` (a batch sent in one
    call is held in memory); ``attachment_line_bytes`` what a request's attachments add
    to its line when not all their base64 goes in it (Gemini names large files by their
    upload). ``find`` is how a submission whose answer was lost is found again (B2): by
    the key agac tags it with, or by time window and request count (Anthropic).
    ``min_requests`` is the fewest requests the provider takes in one batch (Bedrock: 100);
    a file with fewer goes live or waits (the adapter's ``below_minimum``). ``tools``
    says its batch results read tool calls as its live calls do (an action with
    ``tools:`` runs its loop in batch rounds)."""

    input: BatchInput = "file"
    max_requests: int = 50_000
    min_requests: int = 1
    max_bytes: int = 200 * 1024 * 1024
    attachment_max_bytes: int = 0
    attachment_line_bytes: Callable[[tuple[Attachment, ...], int], int] | None = None
    find: Literal["key", "window"] = "key"
    tools: bool = False


WebSearchOption = Literal["max_uses", "allowed_domains", "blocked_domains", "user_location"]
"""An option of ``tools: [web_search]`` (docs/workflow-reference.md, Web search)."""


@dataclass(frozen=True, slots=True)
class WebSearchSpec:
    """A provider's own web search (an action's ``tools: [web_search]``). ``options`` are
    the options it takes (another is refused at validation, naming the provider);
    ``models`` says whether a model can search (None: every model); ``batch`` says its
    batch API searches too (where not, ``run_mode: batch`` is refused at validation);
    ``what`` names the provider's tool in messages and docs."""

    what: str
    options: tuple[WebSearchOption, ...] = ()
    models: Callable[[str], bool] | None = None
    model_hint: str = ""
    batch: bool = True
    batch_note: str = ""
    """Why its batches do not search (said when ``batch`` is False, or ``batch_models``
    refuses the model)."""
    batch_models: Callable[[str], bool] | None = None
    """Whether its batch API serves a model that searches (None: every one that
    searches; Groq's Batch API serves no Compound system)."""
    model_options: Callable[[str], tuple[WebSearchOption, ...]] | None = None
    """The options a model takes, where they differ by model (None: ``options``; Groq's
    browser search takes none, its Compound systems take domain filters and a country)."""
    location_keys: tuple[str, ...] | None = None
    """The ``user_location`` keys it takes (None: every one)."""
    country_names: bool = False
    """Whether ``user_location.country`` is a country's name (Groq: ``germany``), not its
    two-letter code."""
    schema_hint: str = "use a Gemini 3 model, or remove the schema (the answer is then text)"
    """What to do when ``with_schema`` refuses a model."""
    with_functions: bool = True
    """Whether a model that searches may also be offered function tools (OpenAI's search
    models take none)."""
    with_schema: Callable[[str], bool] | None = None
    """Whether a model answers in the action's JSON schema while it searches (None: every
    model; Gemini before 3 refuses a schema beside Google Search)."""
    variants: tuple[WebSearchSpec, ...] = ()
    """The provider's other searches, each for the models its ``models`` serves
    (OpenAI's Chat Completions search models beside the Responses API's tool)."""

    in_loop: bool = False
    """agac runs the search, not the model's provider: the model is offered a
    ``web_search`` function and each call is a turn of the record's tool loop, sent to the
    provider's search API (Ollama's); its hits become the answer's citations."""
    key_env: tuple[str, ...] = ()
    """The variables that may carry the search API's key (none set: refused at
    validation, naming them)."""

    def serves(self, model: str) -> bool:
        return self.models is None or self.models(model)

    def options_of(self, model: str) -> tuple[WebSearchOption, ...]:
        """The options ``model``'s search takes."""
        return self.model_options(model) if self.model_options is not None else self.options

    def batches(self, model: str) -> bool:
        """Whether a batch of ``model`` searches."""
        return self.batch and (self.batch_models is None or self.batch_models(model))

    def for_model(self, model: str) -> WebSearchSpec:
        """The search ``model`` uses: the first variant that serves it, else this one."""
        return next((v for v in self.variants if v.models is not None and v.models(model)), self)


@dataclass(frozen=True, slots=True)
class FlexSpec:
    """A provider's flex tier: synchronous calls at a lower price that may be refused for
    capacity. ``models`` says whether a model is served on it (None: every model);
    ``billed`` is the rate it is billed at: the ``batch`` rate (OpenAI, Azure, Gemini) or
    the ``online`` one (Groq, which sells higher rate limits instead)."""

    billed: Literal["batch", "online"] = "batch"
    models: Callable[[str], bool] | None = None

    def serves(self, model: str) -> bool:
        return self.models is None or self.models(model)


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """One provider, as validation and the engine know it.

    ``name`` is the ``provider/`` part of a model; ``extra`` the pip extra that installs
    its SDK (``sdk_module``, None for none); ``credential_env`` the environment variables
    that may carry its key (empty: it needs none); ``ambient_credentials`` a module that
    finds credentials by itself when none of them is set (Azure: ``azure.identity``, for
    Entra ID), so that its presence is enough.
    ``transports`` are its online transports (empty: no choice). ``batch`` is its batch
    API (None: none); ``local_batch`` says its ``run_mode: batch`` actions run here as live
    calls (Ollama). ``flex`` is its flex tier (None: none). ``cache_kinds`` and
    ``cache_minimum`` (the fewest prefix tokens it caches for a model; None: agac cannot
    ask it to cache) describe prompt caching. ``attachments`` is what files it takes
    (None: none); ``server_tools`` the provider-run tools it bills per use, and
    ``web_search`` its own web search (None: none); ``vision`` says
    some of its models read images. ``options`` are the keys of ``providers: <name>:`` (how
    requests are sent: never part of a fingerprint); ``request_options`` the keys of an
    action's ``provider_options:``, which change the answer: they go with each request
    and into its fingerprint. ``function_tools`` says its adapter speaks a tool protocol
    online (an action's ``tools:``: a turn's calls read into ``Response.tool_calls``, their
    results sent back). ``prefix_order`` says its server caches the prompt prefixes it
    has just seen (vLLM's automatic prefix caching, SGLang's radix cache): the engine
    sends a shard's live records in prompt order, so those sharing a prefix go together.
    """

    name: str
    extra: str = ""
    sdk_module: str | None = None
    credential_env: tuple[str, ...] = ()
    ambient_credentials: str | None = None
    transports: tuple[Transport, ...] = ()
    batch: BatchSpec | None = None
    local_batch: bool = False
    flex: FlexSpec | None = None
    cache_kinds: tuple[CacheKind, ...] = ()
    cache_minimum: Callable[[str], int] | None = None
    attachments: AttachmentLimits | None = None
    server_tools: tuple[str, ...] = ()
    web_search: WebSearchSpec | None = None
    vision: bool = False
    options: tuple[Option, ...] = ()
    request_options: tuple[Option, ...] = ()
    function_tools: bool = False
    prefix_order: bool = False

    @property
    def batch_support(self) -> Literal["api", "local", "none"]:
        """How ``run_mode: batch`` runs: through the batch API, locally as live calls, or
        not at all (refused at validation, ``batch_unsupported``)."""
        if self.batch is not None:
            return "api"
        return "local" if self.local_batch else "none"

    def minimum_for(self, model: str) -> int | None:
        """The fewest prefix tokens cached for ``model``; None when agac cannot ask."""
        return self.cache_minimum(model) if self.cache_minimum is not None else None

    def flex_serves(self, model: str) -> bool:
        return self.flex is not None and self.flex.serves(model)
