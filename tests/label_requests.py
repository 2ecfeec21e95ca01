"""A labelling request as the provider suites send it: a system prompt, a review to label
and the label schema (tests/ is on sys.path, as for pg.py)."""

from __future__ import annotations

from typing import Any

from agac.providers.base import Message, Request

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "required": ["label"],
}


def label_request(
    provider: str,
    model: str,
    text: str = "Classify: great product",
    custom_id: str | None = None,
    **kw: Any,
) -> Request:
    """``provider``'s request with a system prompt and the label schema."""
    fields: dict[str, Any] = {"max_tokens": 256, "schema": SCHEMA, **kw}
    return Request(
        provider=provider,
        model=model,
        messages=(Message("system", "You label reviews."), Message("user", text)),
        custom_id=custom_id,
        **fields,
    )
