"""DeepSeek's wire protocol: OpenAI's Chat Completions at the root (``/chat/completions``),
with no files and no batches.

What differs from OpenAI that a client can see (:class:`~.openai.Flavor` ``dialect``):
usage counts cache hits and misses as ``prompt_cache_hit_tokens`` and
``prompt_cache_miss_tokens`` (no ``prompt_tokens_details``), ``deepseek-reasoner`` sends
its thinking as ``message.reasoning_content`` beside the answer, and a ``json_schema``
response format is refused (JSON mode only). DeepSeek caches prompt prefixes itself,
from 64 tokens.
"""

from __future__ import annotations

from starlette.routing import Route

from .openai import Flavor
from .openai import routes as openai_routes

__all__ = ["DEEPSEEK", "routes"]

DEEPSEEK = Flavor(
    provider="deepseek",
    prefix="",
    file_prefix="file-",
    batch_prefix="batch_",
    retry_after_ms=False,
    service_tier="default",
    windows=frozenset(),
    cursor_paging=False,
    usage_timings=False,
    cache_minimum=64,
    batch=False,
    dialect="deepseek",
)


def routes() -> list[Route]:
    """DeepSeek's one route, ``POST /chat/completions``."""
    return openai_routes(DEEPSEEK)
