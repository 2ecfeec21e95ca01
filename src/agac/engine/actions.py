"""Per-action runtime state built once per run: compiled templates, guard, schema
validator, view spec, provider (and its batch capability, checked here once), concurrency
slots, rate limiter, tool function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from agac.config.functions import FunctionNotFound, code_hash, resolve_function
from agac.config.websearch import searches_in_loop
from agac.confinement import Confinement
from agac.data.view import ViewSpec, compile_view
from agac.engine.canonical import CanonicalForm
from agac.engine.limits.rates import RateLimiter, RateWindow, Slots
from agac.engine.prefixes import PromptPrefix, prompt_prefix
from agac.errors import ConfigError, Problem
from agac.jsontext import encoder
from agac.prompt.attachments import AttachmentTemplate, compile_attachments
from agac.prompt.render import Guard, compile_template
from agac.providers import registry
from agac.providers.base import (
    BatchApi,
    CacheHint,
    ToolDef,
    batch_api,
    fingerprint_of,
)
from agac.providers.encoded import SupportsEncodedCalls
from agac.providers.servertools import SupportsWebSearch, WebSearch
from agac.tools.invoke import LoadedTool, load_tools
from agac.tools.signature import SignatureError
from agac.tools.websearch import SEARCH_DEF

if TYPE_CHECKING:
    from jinja2 import Template

    from agac.config.model import Action, Workflow
    from agac.media import AttachmentLimits
    from agac.providers.base import Provider, Request

__all__ = [
    "ActionRuntime",
    "HeldCache",
    "build_runtime",
    "code_hashes",
    "is_batched",
    "local_batch_notes",
    "provider_limits",
    "shared_limiter",
    "with_code_hashes",
]


class HeldCache:
    """The prompt-cache hint an llm action's requests carry, held for the run.

    It starts as the hint :func:`build_runtime` works out from the action's static prefix;
    the run's explicit context caches (engine/lifecycle/contextcaches.py) name one in it
    when they make it ready and again when they renew it. That name is the one part of an
    action's runtime that changes while the run goes on, so it lives here, in an object the
    frozen :class:`ActionRuntime` is built with, not in an attribute set from outside."""

    __slots__ = ("hint",)

    def __init__(self, hint: CacheHint | None = None) -> None:
        self.hint = hint

    def name(self, name: str | None) -> None:
        """Requests name the explicit cache ``name`` (None: none, they go whole)."""
        assert self.hint is not None, "no cache hint to name a cache in"
        self.hint = replace(self.hint, name=name)


@dataclass(frozen=True, slots=True)
class ActionRuntime:
    """Everything one action needs in a run, built whole by :func:`build_runtime`."""

    action: Action
    name: str
    """The action's name (read several times per unit: a field, not a property)."""
    view: ViewSpec
    slots: AbstractAsyncContextManager[None]
    """The action's ``max_concurrency`` slots."""
    limiter: RateWindow
    """Its rate window."""
    held: HeldCache
    """Its prompt-cache hint, which the run's explicit caches name (see :attr:`cache`)."""
    system: Template | None = None
    prompt: Template | None = None
    guard: Guard | None = None
    validator: SchemaValidator | None = None
    provider: Provider | None = None
    """The adapter of an llm action's provider (None for tools, and for read-only views)."""
    judges: Mapping[str, Provider] = field(default_factory=dict)
    """Check name -> the adapter of its judge's provider (``judge:`` checks, engine/judges.py)."""
    batch: BatchApi | None = None
    """Its provider's batch capability, when it has one (checked once, here)."""
    encoder: SupportsEncodedCalls | None = None
    """Its provider, when it encodes a live call's wire body ahead of the send (checked
    once, here): the call path encodes it while the unit waits for a slot."""
    function: Callable[..., Any] | None = None
    code: str = ""
    """A tool's :func:`agac.config.functions.code_hash`: part of what its results are
    stored under."""
    canonical: CanonicalForm | None = None
    """How its requests become canonical JSON (llm actions)."""
    attachments: tuple[AttachmentTemplate, ...] = ()
    """Its compiled ``attachments:`` entries."""
    reach: Confinement | None = None
    """Where its attachment paths may lead: the project (where relative paths start) and
    the action's ``attachment_folders``."""
    limits: AttachmentLimits | None = None
    """What its provider accepts as attachments (None: nothing)."""
    admitted: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    """path -> (sha256, size) of the files the run's input snapshot attaches, as they were
    at admission."""
    cache_texts: tuple[str | None, str] = (None, "")
    """The static prefix the hint describes, as text: the system prompt when it reads no
    record field (else None), and the static head of the first user message (the rendered
    ``context_prefix`` and the prompt template's literal head). An explicit cache
    (Gemini ``cachedContents``) is created from these."""
    prefix: str = ""
    """The rendered ``context_prefix`` and the blank line after it, which start every first
    user message of the action (``""``: the message is the prompt alone)."""
    cache_head: str = ""
    """The prompt template's literal head: :attr:`cache` describes a request whose rendered
    prompt starts with it, ``cache_fallback`` any other."""
    cache_fallback: CacheHint | None = None
    tools: tuple[LoadedTool, ...] = ()
    """An llm action's function tools (``tools:``), loaded: its units run a tool loop."""
    search: WebSearch | None = None
    """An llm action's web search when agac runs it (its provider's spec says
    ``in_loop``: Ollama): the model is offered a ``web_search`` function
    (:data:`agac.tools.websearch.SEARCH_DEF`) and its units run a tool loop."""
    searcher: SupportsWebSearch | None = None
    """The adapter that sends :attr:`search`'s searches (None without a provider: plans,
    views)."""
    follows: str | None = None
    """A follow-up round's (engine/batch/rounds.py): the batch action whose units it asks
    for (its judges or its repairs); its ledger rows are that action's."""
    origin: str | None = None
    """The ledger origin of a follow-up round's answers (``judge`` for a judge's)."""

    @property
    def ledger_action(self) -> str:
        """The action its calls are ledgered on (a follow-up round's: the one it follows)."""
        return self.follows or self.name

    @property
    def tool_defs(self) -> tuple[ToolDef, ...]:
        """What its requests offer the model (none: no tools)."""
        functions = tuple(t.definition for t in self.tools)
        return functions + (SEARCH_DEF,) if self.search is not None else functions

    @property
    def loops(self) -> bool:
        """Whether its units run a tool loop (function tools, or a search agac runs)."""
        return bool(self.tools) or self.search is not None

    @property
    def cache(self) -> CacheHint | None:
        """What its requests ask of the provider's prompt cache (None: ``cache: off``, a
        tool, or nothing static to cache), naming the run's explicit cache once one is
        ready."""
        return self.held.hint

    @property
    def own_loops(self) -> bool:
        """Whether each record's loop is its own: a function tool with side effects
        (``effect:``) acts for the record, so two records sending identical requests share
        no answer — neither live nor in a batch, nor by fingerprint across runs."""
        return any(t.spec.effect is not None for t in self.tools)

    def identify(self, request: Request, record: str | None = None) -> tuple[str, str]:
        """``request``'s canonical JSON as this action forms it, and its fingerprint: the
        one key of a request, the same in the walk, the approval gate, ``agac plan`` and
        ``agac render``. With :attr:`own_loops`, the fingerprint of ``record``'s request
        is its own (the record's key hashed in after the request)."""
        canonical = self.canonical
        text = canonical.of(request) if canonical is not None else request.canonical()
        if record is not None and self.own_loops:
            return text, fingerprint_of(f"{text}\n{record}")
        return text, fingerprint_of(text)

    @property
    def batch_api(self) -> BatchApi:
        """The batch capability of a batch action's provider (see :func:`is_batched`)."""
        assert self.batch is not None, f"{self.name} has no batch API"
        return self.batch


class SchemaValidator:
    """An action's JSON Schema validator that remembers the answers it found valid.

    Answers are keyed by their compact JSON text, so two answers share a verdict only
    when they are the same JSON value. Classification-like actions get the same few
    answers again and again, and a jsonschema check costs several times a dict lookup.
    At most ``LIMIT`` answers are remembered; invalid ones never are (their errors are
    collected from jsonschema every time)."""

    LIMIT = 4096
    _TEXT = staticmethod(encoder(sort_keys=False, default=None))

    def __init__(self, schema: Any, action: str = "") -> None:
        from jsonschema import Draft202012Validator

        from agac.config.schemarefs import offline_registry, unresolved_refs

        # Validation resolved every $ref into the schema (X2); a schema stored by a run
        # that an older agac admitted may still name a URL: refuse it before any call,
        # and resolve nothing later (the registry retrieves nothing).
        bad = unresolved_refs(schema)
        if bad:
            raise ConfigError(
                problems=[
                    Problem(
                        "schema_ref_refused",
                        f"the schema of action {action!r} has $ref {bad[0]!r}, "
                        "which does not resolve within the schema; agac never fetches a schema",
                        hint="run agac validate, then agac run --new",
                    )
                ]
            )
        self.schema = schema
        self._validator = Draft202012Validator(schema, registry=offline_registry())
        self._valid: set[str] = set()

    def is_valid(self, value: Any) -> bool:
        try:
            key = self._TEXT(value)
        except (TypeError, ValueError):  # not JSON data: no key to remember it by
            return bool(self._validator.is_valid(value))
        if key in self._valid:
            return True
        ok = bool(self._validator.is_valid(value))
        if ok and len(self._valid) < self.LIMIT:
            self._valid.add(key)
        return ok

    def iter_errors(self, value: Any) -> Any:
        return self._validator.iter_errors(value)


_LIMITERS: dict[tuple[str, float | None, float | None], RateLimiter] = {}


def shared_limiter(model: str, rpm: float | None, tpm: float | None) -> RateLimiter:
    """One window per (model, limit): actions calling the same model with the same limit
    (e.g. a ``rate_limit`` in ``defaults``) share it, so together they stay under it."""
    key = (model, rpm, tpm)
    limiter = _LIMITERS.get(key)
    if limiter is None or limiter.loop_bound_elsewhere():
        limiter = _LIMITERS[key] = RateLimiter(rpm, tpm)
    return limiter


def build_runtime(
    action: Action,
    provider: Provider | None,
    root: Path,
    *,
    slots: AbstractAsyncContextManager[None] | None = None,
    limiter: RateWindow | None = None,
    admitted: Mapping[str, tuple[str, int]] | None = None,
    workflow: str = "",
    providers: Mapping[str, Provider] | None = None,
    follows: str | None = None,
    origin: str | None = None,
) -> ActionRuntime:
    """The action's runtime, built whole; ``slots`` and ``limiter`` replace its own
    ``max_concurrency`` slots and rate window (a worker shares both with other shards and
    other workers); ``admitted``: the files the run's snapshot attaches (path -> (sha256,
    size)); ``workflow``: its name, in the cache hint's routing key; ``providers``: the
    run's opened adapters by provider name, where its judges find theirs; ``follows`` and
    ``origin``: a follow-up round's (engine/batch/rounds.py)."""
    llm = action.kind == "llm"
    view = compile_view(action.context.observe, action.context.drop)
    system = compile_template(action.system, f"{action.name}.system") if action.system else None
    prompt = compile_template(action.prompt, f"{action.name}.prompt") if action.prompt else None
    guard = Guard.compile(action.when) if action.when else None
    validator = SchemaValidator(action.schema, action.name) if action.schema is not None else None
    attached = _attachment_parts(action, root)
    found = prompt_prefix(action, workflow, root) if llm and action.prompt is not None else None
    function, code = _tool_function(action, root)
    return ActionRuntime(
        action=action,
        name=action.name,
        view=view,
        slots=slots if slots is not None else Slots(max(1, action.max_concurrency)),
        limiter=limiter if limiter is not None else _own_limiter(action),
        held=HeldCache(found.hint if found is not None else None),
        system=system,
        prompt=prompt,
        guard=guard,
        validator=validator,
        provider=provider,
        judges={
            c.name: providers[c.judge.provider]
            for c in action.checks
            if c.judge is not None and providers and c.judge.provider in providers
        },
        batch=batch_api(provider) if llm else None,
        encoder=provider if llm and isinstance(provider, SupportsEncodedCalls) else None,
        function=function,
        code=code,
        canonical=_canonical(action) if llm else None,
        admitted=admitted or {},
        tools=_function_tools(action, root) if llm else (),
        **_search_parts(action, provider) if llm else {},
        follows=follows,
        origin=origin,
        **attached,
        **_prefix_parts(found),
    )


def _own_limiter(action: Action) -> RateWindow:
    rl = action.rate_limit
    return shared_limiter(
        action.model or action.name, rl.rpm if rl else None, rl.tpm if rl else None
    )


def _canonical(action: Action) -> CanonicalForm:
    return CanonicalForm(
        action.provider or "",
        action.model_name or "",
        action.max_tokens or 1024,
        action.temperature,
        action.schema,
    )


def _tool_function(action: Action, root: Path) -> tuple[Callable[..., Any] | None, str]:
    """A tool's function and its code hash (None, "" for anything else)."""
    if action.kind != "tool" or not action.function:
        return None, ""
    try:
        function = resolve_function(action.function, root)
    except FunctionNotFound as exc:
        raise ConfigError(problems=[Problem("invalid_function", f"{action.name}: {exc}")]) from exc
    return function, code_hash(function)


def _function_tools(action: Action, root: Path) -> tuple[LoadedTool, ...]:
    """An llm action's ``tools:``, imported and described (validation said they can be)."""
    if not action.tools:
        return ()
    try:
        return load_tools(action.tools, root)
    except (FunctionNotFound, SignatureError) as exc:
        raise ConfigError(problems=[Problem("invalid_function", f"{action.name}: {exc}")]) from exc


class _SearchParts(TypedDict, total=False):
    search: WebSearch
    searcher: SupportsWebSearch


def _search_parts(action: Action, provider: Provider | None) -> _SearchParts:
    """An action's web search when agac runs it in the loop, and the adapter that sends
    it (when there is one)."""
    if action.web_search is None or not searches_in_loop(action.provider):
        return {}
    if isinstance(provider, SupportsWebSearch):
        return {"search": action.web_search, "searcher": provider}
    return {"search": action.web_search}


def _attachment_parts(action: Action, root: Path) -> _AttachmentParts:
    if action.kind != "llm" or not action.attachments:
        return {}
    return {
        "attachments": compile_attachments(action.attachments, action.name),
        "reach": Confinement.of(root, action.attachment_folders),
        "limits": provider_limits(action.provider or ""),
    }


def _prefix_parts(found: PromptPrefix | None) -> _PrefixParts:
    if found is None:
        return {}
    return {
        "prefix": found.prefix,
        "cache_head": found.head,
        "cache_texts": found.texts,
        "cache_fallback": found.fallback,
    }


class _AttachmentParts(TypedDict, total=False):
    attachments: tuple[AttachmentTemplate, ...]
    reach: Confinement
    limits: AttachmentLimits | None


class _PrefixParts(TypedDict, total=False):
    prefix: str
    cache_head: str
    cache_texts: tuple[str | None, str]
    cache_fallback: CacheHint | None


def with_code_hashes(workflow: Workflow, root: Path) -> Workflow:
    """``workflow`` with each tool's ``code_hash`` as its function is now, as a run is
    admitted with it (kept in its config snapshot). A function that cannot be imported
    keeps None: the run reports it when it builds the action."""
    actions = []
    for action in workflow.actions:
        if action.kind == "tool" and action.function:
            try:
                action = replace(
                    action, code_hash=code_hash(resolve_function(action.function, root))
                )
            except FunctionNotFound:
                action = replace(action, code_hash=None)
        actions.append(action)
    return replace(workflow, actions=tuple(actions))


def code_hashes(workflow: Workflow) -> dict[str, str | None]:
    """tool action -> its code hash, in a workflow (a run's as its graph holds it)."""
    return {a.name: a.code_hash for a in workflow.actions if a.kind == "tool"}


def provider_limits(provider: str) -> AttachmentLimits | None:
    """What ``provider`` accepts as attachments (None: nothing, or no such provider)."""
    try:
        return registry.provider_spec(provider).attachments
    except (ConfigError, ImportError):
        return None  # validation reported it


def is_batched(rt: ActionRuntime) -> bool:
    """A batch action on a provider with a batch API (Ollama runs its batches locally)."""
    return rt.action.kind == "llm" and rt.action.run_mode == "batch" and rt.batch is not None


def local_batch_notes(actions: Sequence[Action]) -> list[str]:
    """What a run tells its user about batch actions on a provider that runs them locally
    (Ollama, the one documented exception to ``batch_unsupported``): no provider batch,
    no pause, live calls at the live price."""
    notes = []
    for a in actions:
        provider = a.provider
        if a.kind != "llm" or a.run_mode != "batch" or not provider:
            continue
        try:
            local = registry.provider_spec(provider).batch_support == "local"
        except (ConfigError, ImportError):
            continue  # validation judged it; nothing to add here
        if local:
            notes.append(
                f"{a.name}: {provider} has no batch API; its run_mode: batch runs "
                "here as live calls (no provider batch, no pause, the live price)"
            )
    return notes
