"""What the Claude-on-Vertex tests share: the model, its rawPredict path on the emulator,
and labelling requests (the Gemini ones are in vertex_support)."""

from __future__ import annotations

from typing import Any

from agac.emulator.google_auth import LOCATION, PROJECT
from agac.providers.base import Request
from label_requests import label_request

__all__ = ["CLAUDE", "PREDICT", "claude_request", "claude_requests"]

CLAUDE = "claude-sonnet-4-5@20250929"
PREDICT = (
    f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/anthropic/models/{CLAUDE}:rawPredict"
)


def claude_request(
    text: str = "Classify: great product", custom_id: str | None = None, **kw: Any
) -> Request:
    """A Claude-on-Vertex request with a system prompt and the label schema."""
    return label_request("vertex", CLAUDE, text, custom_id, **kw)


def claude_requests(n: int, start: int = 0) -> list[Request]:
    return [claude_request(f"review {i}", custom_id=f"c{i}") for i in range(start, start + n)]
