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

from .openai import clone
from .openai import routes as openai_routes

__all__ = ["DEEPSEEK", "routes"]

DEEPSEEK = clone("deepseek", "", cache_minimum=64, dialect="deepseek")


def routes() -> list[Route]:
    """DeepSeek's one route, ``POST /chat/completions``."""
    return openai_routes(DEEPSEEK)
