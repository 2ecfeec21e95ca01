"""The offline ``mock`` provider: deterministic, schema-conforming, zero network.

Same request -> same answer. With a schema, the answer is a JSON value built from
the schema (enums pick by hash, strings echo a short digest of the prompt); without
one it is text. Latency and failure rate come from ``AGAC_MOCK_LATENCY_MS`` and
``AGAC_MOCK_FAIL_RATE`` (the environment wins) or ``providers: mock:`` options in
agac.yml; both default to 0. Whether a call fails is decided by a hash of
(request fingerprint, attempt), so runs are reproducible and a retry can succeed.
The mock has no batch API of its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from typing import Any
from urllib.parse import unquote

from agac.errors import RetryableError, UnsupportedError
from agac.media import AttachmentLimits, read_verified
from agac.providers.base import (
    BatchHandle,
    BatchStatus,
    BilledWork,
    ProviderSettings,
    Request,
    Response,
    Result,
    Usage,
)
from agac.providers.options import Option
from agac.providers.spec import ProviderSpec

__all__ = ["MockProvider", "mock_value"]

_TEXT = json.JSONEncoder(
    separators=(",", ":")
).encode  # json.dumps(separators=...) builds one per call


def _digest(*parts: str) -> int:
    h = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "big")


def mock_value(
    schema: dict[str, Any] | None, seed: int, depth: int = 0, root: dict[str, Any] | None = None
) -> Any:
    """A deterministic value that conforms to the common JSON Schema keywords; a ``$ref``
    is followed when it is a pointer into the schema (``#/$defs/label``), the only kind
    an action's schema holds after validation."""
    root = schema if root is None else root
    schema = _pointed(schema, root)
    if not isinstance(schema, dict) or depth > 8:
        return f"mock-{seed % 100000:05d}"
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][seed % len(schema["enum"])]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return mock_value(schema[key][0], seed, depth + 1, root)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(_pointed(part, root) or {})
        return mock_value(merged, seed, depth + 1, root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    return _typed_value(schema, kind, seed, depth, root)


def _pointed(schema: Any, root: Any) -> Any:
    """What a ``#/…`` ref points at (JSON pointer, ``~1`` and ``~0`` unescaped)."""
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#"):
        return schema
    node = root
    for part in unquote(ref[1:]).split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _typed_value(
    schema: dict[str, Any], kind: str, seed: int, depth: int, root: dict[str, Any] | None
) -> Any:
    if kind == "object":
        props = schema.get("properties") or {}
        return {
            name: mock_value(sub, _digest(str(seed), name), depth + 1, root)
            for name, sub in props.items()
        }
    if kind == "array":
        n = max(int(schema.get("minItems", 1)), 1)
        n = min(n, int(schema.get("maxItems", n)))
        return [mock_value(schema.get("items"), seed + i, depth + 1, root) for i in range(n)]
    if kind == "integer":
        lo = int(schema.get("minimum", 0))
        hi = int(schema.get("maximum", lo + 100))
        return lo + seed % (hi - lo + 1)
    if kind == "number":
        low = float(schema.get("minimum", 0.0))
        high = float(schema.get("maximum", low + 1.0))
        return round(low + (seed % 1000) / 1000 * (high - low), 3)
    if kind == "boolean":
        return bool(seed % 2)
    if kind == "null":
        return None
    text = f"mock-{seed % 100000:05d}"
    min_len = int(schema.get("minLength", 0))
    if len(text) < min_len:
        text = text.ljust(min_len, "x")
    if "maxLength" in schema:
        text = text[: int(schema["maxLength"])]
    return text


ENVIRONMENT = {"latency_ms": "AGAC_MOCK_LATENCY_MS", "fail_rate": "AGAC_MOCK_FAIL_RATE"}
"""The environment variable of each option, which wins over ``providers: mock:``."""


def _setting(option: Option, options: dict[str, Any]) -> float:
    """The environment's value (checked like agac.yml's), else agac.yml's, else 0."""
    found = option.from_environment(ENVIRONMENT[option.name], os.environ)
    return float(found if found is not None else options.get(option.name) or 0)


class MockProvider:
    """Deterministic offline provider (``model: mock/<any name>``); costs 0."""

    spec = ProviderSpec(
        name="mock",
        #: Every kind of attachment, without limits (the mock reads no bytes; its answers
        #: depend on each attachment's hash).
        attachments=AttachmentLimits(),
        vision=True,
        #: ``providers: mock:`` in agac.yml (the environment variables win).
        options=(
            Option(
                "latency_ms",
                "number",
                "milliseconds each call waits before it answers (`AGAC_MOCK_LATENCY_MS` wins)",
                default=0,
            ),
            Option(
                "fail_rate",
                "number",
                "the share of calls that fail with a retryable 500, 0–1 "
                "(`AGAC_MOCK_FAIL_RATE` wins)",
                default=0,
                maximum=1.0,
            ),
        ),
    )
    name = "mock"

    def __init__(self, settings: ProviderSettings | None = None) -> None:
        options = (settings.options if settings else {}) or {}
        latency, fail_rate = self.spec.options
        self.latency_ms = _setting(latency, options)
        self.fail_rate = _setting(fail_rate, options)
        self._attempts: dict[str, int] = defaultdict(int)

    async def complete(self, request: Request) -> Response:
        for att in request.attachments:
            read_verified(att)  # as every adapter does: the bytes asked about, or nothing
        if self.latency_ms > 0:
            await asyncio.sleep(self.latency_ms / 1000)
        if self.fail_rate > 0:
            fp = request.fingerprint()
            self._attempts[fp] += 1
            roll = _digest(fp, str(self._attempts[fp])) % 10_000 / 10_000
            if roll < self.fail_rate:
                raise RetryableError(
                    "mock provider: injected failure (AGAC_MOCK_FAIL_RATE)", status=500
                )
        return self._answer(request)

    def _answer(self, request: Request) -> Response:
        seed = _digest(
            request.model,
            *(m.content for m in request.messages),
            str(request.seed),
            *(a.sha256 for a in request.attachments),
        )
        parsed = None
        if request.schema is not None:
            parsed = mock_value(request.schema, seed)
            text = _TEXT(parsed)
        else:
            last = request.messages[-1].content if request.messages else ""
            text = f"mock answer {seed % 100000:05d} to: {last[:60]}"
        chars = sum(len(m.content) for m in request.messages)
        usage = Usage(input_tokens=math.ceil(chars / 4), output_tokens=math.ceil(len(text) / 4))
        return Response(
            text=text,
            model=request.model,
            stop_reason="end",
            usage=usage,
            parsed=parsed,
            service_tier="default",
            latency_ms=self.latency_ms,
        )

    # The mock has no provider batch API.
    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        raise UnsupportedError("the mock provider has no batch API")

    async def poll_batch(self, handle: BatchHandle) -> BatchStatus:
        raise UnsupportedError("the mock provider has no batch API")

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        raise UnsupportedError("the mock provider has no batch API")
        yield  # pragma: no cover

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        raise UnsupportedError("the mock provider has no batch API")

    async def cancel_batch(self, handle: BatchHandle) -> None:
        raise UnsupportedError("the mock provider has no batch API")

    async def find_batch(self, key: str) -> BatchHandle | None:
        return None

    async def aclose(self) -> None:
        return None
