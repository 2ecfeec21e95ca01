"""OpenRouter (``pip install -e '.[openai]'``): model ``openrouter/<vendor>/<model>``
(e.g. ``openrouter/openai/gpt-4o-mini``), live calls.

OpenRouter routes an OpenAI-shaped Chat Completions request to one of the providers that
serve the model. ``transport: sdk`` drives the official ``openai`` SDK pointed at
``https://openrouter.ai/api/v1`` (``OPENROUTER_BASE_URL`` or ``base_url:``), the lean
transport posts to ``<base>/chat/completions``; the key is ``OPENROUTER_API_KEY``. What
differs from OpenAI, handled here:

- every answer says what it cost (``usage.cost``, USD) and which provider served it
  (``provider``): the ledger takes that cost instead of pricing the tokens, and keeps the
  provider (:attr:`~agac.providers.base.Response.billed_usd`, ``served_by``);
- an action may pin the route with ``provider_options: {provider_order: "A,B",
  allow_fallbacks: "false"}``, sent as OpenRouter's ``provider`` object (part of the
  request's fingerprint: another route may answer differently);
- the limit goes as ``max_tokens``; reasoning comes as ``message.reasoning`` (kept out of
  the answer).

OpenRouter's batch API (inline requests, one model per batch) is not used yet: a batch
action on OpenRouter is refused at validation (``batch_unsupported``).
"""

from __future__ import annotations

from typing import Any

from agac.providers._attachments import Data, live_base64
from agac.providers._openai_compat import REASONING_EFFORT, OpenAICompatProvider
from agac.providers.base import TRANSPORTS, Request
from agac.providers.options import TIMEOUT, Option, structured_output
from agac.providers.spec import ProviderSpec

__all__ = ["OPENROUTER_BASE_URL", "OpenRouterProvider"]

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
"""OpenRouter's OpenAI-compatible endpoint."""

PROVIDER_ORDER = Option(
    "provider_order",
    "text",
    "the providers OpenRouter tries, in order, comma-separated (sent as `provider.order`; "
    "part of the request's fingerprint)",
)
ALLOW_FALLBACKS = Option(
    "allow_fallbacks",
    "choice",
    "whether OpenRouter may go past `provider_order` to other providers (sent as "
    "`provider.allow_fallbacks`)",
    choices=("true", "false"),
)


class OpenRouterProvider(OpenAICompatProvider):
    """OpenRouter Chat Completions (live); see the module docstring."""

    spec = ProviderSpec(
        name="openrouter",
        extra="openai",
        sdk_module="openai",
        credential_env=("OPENROUTER_API_KEY",),
        transports=TRANSPORTS,
        cache_kinds=("implicit",),
        options=(
            TIMEOUT,
            structured_output("json_mode", "JSON mode with the schema in the prompt"),
        ),
        request_options=(REASONING_EFFORT, PROVIDER_ORDER, ALLOW_FALLBACKS),
    )
    base_url_env = "OPENROUTER_BASE_URL"
    default_base_url = OPENROUTER_BASE_URL
    chat_path = "/chat/completions"
    max_tokens_param = "max_tokens"

    def _chat_params(
        self, request: Request, *, native: bool, data: Data = live_base64
    ) -> dict[str, Any]:
        """OpenAI's body, with the route options folded into OpenRouter's ``provider``."""
        params = super()._chat_params(request, native=native, data=data)
        route: dict[str, Any] = {}
        order = params.pop(PROVIDER_ORDER.name, None)
        if order:
            route["order"] = [p.strip() for p in str(order).split(",") if p.strip()]
        fallbacks = params.pop(ALLOW_FALLBACKS.name, None)
        if fallbacks is not None:
            route["allow_fallbacks"] = str(fallbacks) == "true"
        if route:
            params["provider"] = route
        return params

    def _make_client(self) -> Any:
        # The openai SDK, pointed at OpenRouter (never at OPENAI_BASE_URL); max_retries=0:
        # the engine owns retries (docs/providers.md).
        return self._sdk.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self._base_url or OPENROUTER_BASE_URL,
            timeout=self._timeout,
            max_retries=0,
        )

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        return (self._sdk.OpenAIError,)

    async def _sdk_chat(self, params: dict[str, Any], timeout: float | None) -> Any:
        # ``provider`` is not an argument of the openai SDK: it goes in the body as is.
        route = params.pop("provider", None)
        extra = {"extra_body": {"provider": route}} if route else {}
        return await super()._sdk_chat({**params, **extra}, timeout)
