"""What the Vertex AI tests share: the project, location, bucket and model, requests (the
environment of a Vertex user pointed at the emulator is ``RunningEmulator.vertex_env``)."""

from __future__ import annotations

from typing import Any

from agac.emulator.google_auth import LOCATION, PROJECT
from agac.providers.base import Message, Request

__all__ = ["BUCKET", "LOCATION", "MODEL", "PROJECT", "SCHEMA", "request", "requests"]

BUCKET = "agac-vertex"
MODEL = "gemini-2.5-flash"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "required": ["label"],
}


def request(
    text: str = "Classify: great product", custom_id: str | None = None, **kw: Any
) -> Request:
    """A Vertex request with a system prompt and the label schema."""
    fields: dict[str, Any] = {"max_tokens": 256, "schema": SCHEMA, **kw}
    return Request(
        provider="vertex",
        model=MODEL,
        messages=(Message("system", "You label reviews."), Message("user", text)),
        custom_id=custom_id,
        **fields,
    )


def requests(n: int, start: int = 0) -> list[Request]:
    return [request(f"review {i}", custom_id=f"r{i}") for i in range(start, start + n)]
