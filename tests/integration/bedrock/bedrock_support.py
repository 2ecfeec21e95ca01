"""What the Bedrock tests share: fake AWS settings, the bucket and role, requests."""

from __future__ import annotations

from typing import Any

from agac.providers.base import Request
from label_requests import label_request

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


def request(
    text: str = "Classify: great product", custom_id: str | None = None, **kw: Any
) -> Request:
    """A Bedrock request with a system prompt and the label schema."""
    return label_request("bedrock", MODEL, text, custom_id, **kw)


def requests(n: int, start: int = 0) -> list[Request]:
    return [request(f"review {i}", custom_id=f"r{i}") for i in range(start, start + n)]
