"""A local vLLM or SGLang server's wire protocol: OpenAI's Chat Completions under
``/vllm/v1`` (point ``VLLM_BASE_URL`` at ``<emulator>/vllm/v1``), with no files and no
batches (vLLM serves neither; its batches run offline, ``vllm run-batch``).

Any key is accepted, as a server started without ``--api-key`` does. Its finish reasons
are OpenAI's, plus ``abort`` (the server dropped the request), which a ``reply`` fault can
send (``{"reply": {"stop": "abort"}}``).
"""

from __future__ import annotations

from starlette.routing import Route

from .openai import clone
from .openai import routes as openai_routes

__all__ = ["VLLM", "routes"]

VLLM = clone("vllm", "/vllm/v1")


def routes() -> list[Route]:
    """The server's chat route."""
    return openai_routes(VLLM)
