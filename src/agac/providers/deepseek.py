"""DeepSeek (``pip install -e '.[openai]'``): live calls only — DeepSeek sells no batch
API; it sells cheaper hours instead (a price calendar, docs/providers.md, DeepSeek).

DeepSeek speaks OpenAI's Chat Completions protocol at ``https://api.deepseek.com`` and
has no SDK of its own: ``transport: sdk`` drives the official ``openai`` SDK with that
base URL, the lean transport posts to ``<base>/chat/completions``. The differences from
OpenAI handled here: the limit goes as ``max_tokens``; structured output is JSON mode
only (``response_format: json_object``, the schema in the system prompt); cached prompt
tokens come as ``prompt_cache_hit_tokens`` (read by :func:`chat_response`); the
reasoning of ``deepseek-reasoner`` comes as ``message.reasoning_content`` and never
enters the answer; ``insufficient_system_resource`` ends an answer early
(:mod:`agac.providers.stops`). DeepSeek caches prompt prefixes by itself.
"""

from __future__ import annotations

from agac.providers._openai_compat import OpenAISdkProvider
from agac.providers.base import TRANSPORTS
from agac.providers.options import TIMEOUT
from agac.providers.spec import ProviderSpec

__all__ = ["DEEPSEEK_BASE_URL", "DeepSeekProvider"]

DEEPSEEK_BASE_URL = "https://api.deepseek.com"
"""The base URL DeepSeek's docs give for OpenAI-compatible clients."""


class DeepSeekProvider(OpenAISdkProvider):
    """DeepSeek Chat Completions (live only)."""

    #: No batch API, no flex tier, text only; prompts cached by DeepSeek itself.
    spec = ProviderSpec(
        name="deepseek",
        extra="openai",
        sdk_module="openai",
        credential_env=("DEEPSEEK_API_KEY",),
        transports=TRANSPORTS,
        cache_kinds=("implicit",),
        options=(TIMEOUT,),
        function_tools=True,
    )
    base_url_env = "DEEPSEEK_BASE_URL"
    default_base_url = DEEPSEEK_BASE_URL
    chat_path = "/chat/completions"
    max_tokens_param = "max_tokens"

    def _native_schema(self, model: str) -> bool:
        """DeepSeek takes ``json_object`` only: a schema always goes in the prompt."""
        return False
