"""Groq's wire protocol: an OpenAI clone served under ``/openai/v1``.

The differences from OpenAI that a client can see: the path prefix, ids (``file_01…``,
``batch_01…``), ``completion_window`` from ``24h`` to ``7d``, list paging by ``cursor``
with ``paging.next_cursor``, Groq's timing fields in ``usage``, ``service_tier`` values
(``on_demand``), and 429s that carry ``retry-after`` in seconds only (no
``retry-after-ms``).
"""

from __future__ import annotations

from starlette.routing import Route

from .openai import Flavor
from .openai import routes as openai_routes

__all__ = ["GROQ", "routes"]

GROQ = Flavor(
    provider="groq",
    prefix="/openai/v1",
    file_prefix="file_01",
    batch_prefix="batch_01",
    retry_after_ms=False,
    service_tier="on_demand",
    windows=frozenset(
        {
            "24h",
            "48h",
            "72h",
            "96h",
            "120h",
            "144h",
            "168h",
            "1d",
            "2d",
            "3d",
            "4d",
            "5d",
            "6d",
            "7d",
        }
    ),
    cursor_paging=True,
    usage_timings=True,
)


def routes() -> list[Route]:
    """Groq's routes (chat, files, batches) under ``/openai/v1``."""
    return openai_routes(GROQ)
