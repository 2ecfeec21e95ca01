"""What the Vertex AI tests share: the project, location, bucket and model, requests (the
environment of a Vertex user pointed at the emulator is ``RunningEmulator.vertex_env``)."""

from __future__ import annotations

from typing import Any

from agac.emulator.google_auth import LOCATION, PROJECT
from agac.providers.base import Request
from label_requests import SCHEMA, label_request

__all__ = ["BUCKET", "LOCATION", "MODEL", "PROJECT", "SCHEMA", "request", "requests"]

BUCKET = "agac-vertex"
MODEL = "gemini-2.5-flash"


def request(
    text: str = "Classify: great product", custom_id: str | None = None, **kw: Any
) -> Request:
    """A Vertex request with a system prompt and the label schema."""
    return label_request("vertex", MODEL, text, custom_id, **kw)


def requests(n: int, start: int = 0) -> list[Request]:
    return [request(f"review {i}", custom_id=f"r{i}") for i in range(start, start + n)]
