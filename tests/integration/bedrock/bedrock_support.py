"""What the Bedrock tests share: fake AWS settings, the bucket and role, requests."""

from __future__ import annotations

from typing import Any

from agac.providers.base import Message, Request

AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
BUCKET = "agac-bedrock"
ROLE = "arn:aws:iam::123456789012:role/agac-batch"
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "required": ["label"],
}


def request(
    text: str = "Classify: great product", custom_id: str | None = None, **kw: Any
) -> Request:
    """A Bedrock request with a system prompt and the label schema."""
    fields: dict[str, Any] = {"max_tokens": 256, "schema": SCHEMA, **kw}
    return Request(
        provider="bedrock",
        model=MODEL,
        messages=(Message("system", "You label reviews."), Message("user", text)),
        custom_id=custom_id,
        **fields,
    )


def requests(n: int, start: int = 0) -> list[Request]:
    return [request(f"review {i}", custom_id=f"r{i}") for i in range(start, start + n)]
