"""OpenRouter's wire protocol for live calls: OpenAI's Chat Completions under
``/openrouter/api/v1`` (point ``OPENROUTER_BASE_URL`` at ``<emulator>/openrouter/api/v1``).

What differs from OpenAI that a client can see (:class:`~.openai.Flavor` ``dialect``): the
model is ``<vendor>/<model>``; every answer says what it cost, ``usage.cost`` in USD (here a
dollar per million tokens), and which provider served it, ``provider`` (the first of the
request's ``provider.order``, else the vendor's name). No files or batches here.
"""

from __future__ import annotations

from starlette.routing import Route

from .openai import clone
from .openai import routes as openai_routes

__all__ = ["OPENROUTER", "routes"]

OPENROUTER = clone("openrouter", "/openrouter/api/v1", dialect="openrouter")


def routes() -> list[Route]:
    """OpenRouter's chat route."""
    return openai_routes(OPENROUTER)
