"""Groq (``pip install -e '.[groq]'``): online calls on agac's lean transport (or the
official ``groq`` SDK with ``transport: sdk``), batches on the SDK.

Groq's Chat Completions and Batch APIs clone OpenAI's under ``/openai/v1``, so the
logic is shared (:mod:`agac.providers._openai_compat`). Differences handled here:
listing batches pages with ``paging.next_cursor`` (the SDK's ``batches.list`` takes
no paging arguments), and ``json_schema`` output exists only on some models — a
model that rejects it falls back to JSON mode with the schema in the system prompt.
Batch discount and prompt caching do not stack on Groq (a pricing matter). Reasoning
models that write ``<think>`` into the content by default are asked for it apart
(``reasoning_format: parsed``), live and in batch lines. Groq caches
prompts by itself where it does and takes no ``prompt_cache_key``, so a cache hint sends
nothing here (docs/providers.md, Prompt caching). Web search (``tools: [web_search]``) is
Groq's browser search on its GPT-OSS models and the web search of its Compound systems
(:mod:`agac.providers._search_wire`); the answer's ``executed_tools`` say what was searched
and visited, as billed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agac.errors import FatalError, ProviderError
from agac.providers._attachments import GROQ_LIMITS
from agac.providers._common import pick
from agac.providers._openai_compat import OpenAICompatProvider, compat_spec
from agac.providers._reasoning import thinks_inline
from agac.providers._search_wire import groq_compound, groq_web_search
from agac.providers.base import ProviderSettings, Request, Response
from agac.providers.encoded import EncodedCall
from agac.providers.spec import FlexSpec, WebSearchOption, WebSearchSpec

__all__ = ["GroqProvider"]


def _search_options(model: str) -> tuple[WebSearchOption, ...]:
    """Groq's browser search takes no options; a Compound system's search takes domain
    filters and a country (``search_settings``)."""
    if groq_compound(model):
        return ("allowed_domains", "blocked_domains", "user_location")
    return ()


class GroqProvider(OpenAICompatProvider):
    """Groq Chat Completions and Batch API."""

    #: Images only, on its vision models (``image_url`` parts); prompts cached by Groq
    #: itself where it does.
    spec = compat_spec(
        "groq",
        extra="groq",
        sdk_module="groq",
        credential_env=("GROQ_API_KEY",),
        attachments=GROQ_LIMITS,
        cache_kinds=("implicit",),
        # ``service_tier: flex``: the on-demand price with higher rate limits; a 498
        # ``capacity_exceeded`` when it has no room.
        flex=FlexSpec(billed="online"),
        web_search=WebSearchSpec(
            "Groq's web search (browser_search on GPT-OSS, a Compound system's own)",
            models=lambda model: groq_compound(model) or model.startswith("openai/gpt-oss"),
            model_hint="use openai/gpt-oss-20b, openai/gpt-oss-120b (browser search) or "
            "groq/compound, groq/compound-mini",
            batch_models=lambda model: not groq_compound(model),
            batch_note="Groq's Batch API serves no Compound system; use openai/gpt-oss-120b "
            "(browser search) for a batch",
            model_options=_search_options,
            location_keys=("country",),
            country_names=True,
            # Browser search "is not compatible with structured outputs" (Groq's docs).
            with_schema=groq_compound,
            schema_hint="use groq/compound or groq/compound-mini, or remove the schema (the "
            "answer is then text)",
            with_functions=False,
        ),
    )
    search_per_call = False
    base_url_env = "GROQ_BASE_URL"
    default_base_url = "https://api.groq.com"
    chat_path = "/openai/v1/chat/completions"

    def __init__(self, settings: ProviderSettings) -> None:
        super().__init__(settings)
        # Models seen to reject ``reasoning_format``: their reasoning is split inline.
        self._no_reasoning_format: set[str] = set()

    def _offer_web_search(self, request: Request, params: dict[str, Any]) -> None:
        """Browser search as a tool of a GPT-OSS model; a Compound system's search settings
        and the tools it may use."""
        assert request.web_search is not None
        fields = groq_web_search(request.model, request.web_search)
        params["tools"] = [*params.get("tools", ()), *fields.pop("tools", ())]
        if not params["tools"]:
            del params["tools"]
        params.update(fields)

    def _reasoning_params(self, model: str) -> dict[str, Any]:
        """``reasoning_format: parsed`` for the models that would write ``<think>`` into the
        answer (``deepseek-r1-*``, ``qwen3``, QwQ): Groq then sends it as
        ``message.reasoning``."""
        if thinks_inline(model) and model not in self._no_reasoning_format:
            return {"reasoning_format": "parsed"}
        return {}

    def encode_call(self, request: Request) -> EncodedCall | None:
        """None: the fallback from ``reasoning_format`` lives in :meth:`complete`, so a
        Groq body is encoded at its send."""
        return None

    async def complete(self, request: Request) -> Response:
        """As every Chat Completions adapter; a model that rejects ``reasoning_format`` (a
        400 naming it) is asked again without it, and remembered."""
        try:
            return await super().complete(request)
        except FatalError as err:
            if not (_reasoning_rejected(err) and self._reasoning_params(request.model)):
                raise
            self._no_reasoning_format.add(request.model)
            return await super().complete(request)

    def _make_client(self) -> Any:
        # max_retries=0: the engine owns retries (docs/providers.md).
        return self._sdk.AsyncGroq(
            api_key=self._api_key, base_url=self._base_url, timeout=self._timeout, max_retries=0
        )

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        return (self._sdk.GroqError,)

    async def _list_batches(self) -> AsyncIterator[Any]:
        cursor: str | None = None
        while True:
            query = {"cursor": cursor} if cursor else None
            page = await self._client.batches.list(extra_query=query)
            for batch in page.data or []:
                yield batch
            cursor = pick(pick(page, "paging"), "next_cursor")
            if not cursor:
                return


def _reasoning_rejected(err: ProviderError) -> bool:
    return err.status == 400 and "reasoning_format" in str(err)
