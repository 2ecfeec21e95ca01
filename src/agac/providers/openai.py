"""OpenAI (``pip install -e '.[openai]'``).

Live calls use Chat Completions with ``response_format: json_schema`` (``strict``
when the schema allows it), on agac's lean transport or, with ``transport: sdk``, the
official ``openai`` SDK; batches use the Batch API with a JSONL file, through the SDK.
A request that searches the web goes to the Responses API (``/v1/responses``, live and
as a batch's endpoint: :mod:`agac.providers._responses_wire`), but on a Chat Completions
search model.
The shared logic lives in :mod:`agac.providers._openai_compat`. The SDK is imported
when first needed (a batch call, or the SDK transport), never when this module is.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

from agac.providers._attachments import OPENAI_LIMITS
from agac.providers._openai_compat import OpenAICompatProvider, compat_spec
from agac.providers.base import Request
from agac.providers.spec import FlexSpec, WebSearchSpec

__all__ = ["OpenAIProvider"]


#: The models OpenAI serves on its flex tier (o3, o4-mini and the GPT-5 family).
FLEX_MODELS = ("o3", "o4-mini", "gpt-5")


def openai_flex_model(model: str) -> bool:
    return model.startswith(FLEX_MODELS)


def openai_cache_minimum(model: str) -> int:
    """OpenAI caches a prompt prefix of 1,024 tokens or more, on every model."""
    return 1024


def openai_search_model(model: str) -> bool:
    """A model that searches the web in Chat Completions (``web_search_options``)."""
    return "search" in model


class OpenAIProvider(OpenAICompatProvider):
    """OpenAI Chat Completions and Batch API."""

    #: Images and PDFs (``image_url`` and ``file`` parts); a cache hint's key goes as
    #: ``prompt_cache_key`` (docs/providers.md, Prompt caching).
    spec = compat_spec(
        "openai",
        extra="openai",
        sdk_module="openai",
        credential_env=("OPENAI_API_KEY",),
        attachments=OPENAI_LIMITS,
        cache_kinds=("routing_key", "implicit"),
        cache_minimum=openai_cache_minimum,
        # ``service_tier: flex``, billed at the Batch API's rates.
        flex=FlexSpec(billed="batch", models=openai_flex_model),
        # The Responses API's web_search tool on every model (live and in batches), but
        # Chat Completions' search models, which search on their own (online only).
        web_search=WebSearchSpec(
            "OpenAI's web search (the Responses API's web_search tool)",
            options=("max_uses", "allowed_domains", "user_location"),
            variants=(
                WebSearchSpec(
                    "OpenAI's search models (web_search_options in Chat Completions)",
                    options=("user_location",),
                    models=openai_search_model,
                    batch=False,
                    batch_note="OpenAI's Batch API serves no search model; use a model "
                    "that takes the web_search tool (gpt-5, gpt-4.1, gpt-4o, o3, o4-mini)",
                    with_functions=False,
                ),
            ),
        ),
    )
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com/v1"
    chat_path = "/chat/completions"
    responses_path = "/responses"
    prompt_cache_key = True

    def _via_responses(self, request: Request) -> bool:
        # Web search goes to the Responses API, but on a Chat Completions search model.
        return request.web_search is not None and not openai_search_model(request.model)

    def _make_client(self) -> Any:
        # max_retries=0: the engine owns retries (docs/providers.md).
        return self._sdk.AsyncOpenAI(
            api_key=self._api_key, base_url=self._base_url, timeout=self._timeout, max_retries=0
        )

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        return (self._sdk.OpenAIError,)

    def _lean_headers(self) -> dict[str, str]:
        # As the SDK: the organization and project come from its own variables.
        headers = super()._lean_headers()
        for header, variable in (
            ("OpenAI-Organization", "OPENAI_ORG_ID"),
            ("OpenAI-Project", "OPENAI_PROJECT_ID"),
        ):
            value = os.environ.get(variable)
            if value:
                headers[header] = value
        return headers

    async def _list_batches(self) -> AsyncIterator[Any]:
        # The SDK's cursor page follows ``after`` by itself.
        async for batch in self._client.batches.list(limit=100):
            yield batch
