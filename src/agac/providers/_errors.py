"""The error taxonomy of docs/providers.md, shared by the built-in adapters.

Each adapter owns one ``_translate_errors`` context manager that catches its SDK's
exceptions and raises what :func:`classify` returns ``from`` them. The rules:

=====================================  ==============================================
HTTP answer                            taxonomy class
=====================================  ==============================================
429 / 529 with a hint (Retry-After,    ``WaitError(retry_after=s)``: no attempt spent
retry-after-ms, Gemini RetryInfo)
quota or spend cap (OpenAI             ``FatalError`` (``provider_error``): retrying
``insufficient_quota``, Anthropic      cannot help
spend-limit codes, Gemini QuotaFailure
without RetryInfo)
429 / 529 without a hint               ``RetryableError``
a flex capacity refusal (HTTP 498      ``WaitError``: no attempt spent (the flex tier
``capacity_exceeded``; 429             says it has no room now; come back later)
``resource_unavailable``)
408, 409, 5xx, timeouts, connections   ``RetryableError``
400, 401, 403, 404, 422, other 4xx     ``FatalError``
=====================================  ==============================================
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from agac.errors import FatalError, ProviderError, RetryableError, TransportError, WaitError

__all__ = [
    "CAPACITY_CODES",
    "CAPACITY_WAIT",
    "QUOTA_CODES",
    "classify",
    "connection_error",
    "describe",
    "error_fields",
    "malformed_answer",
    "request_id_of",
    "retry_after_seconds",
    "shape_errors",
    "transport_errors",
]

#: Error codes of a flex tier that has no capacity now (Groq's 498 ``capacity_exceeded``,
#: OpenAI's and Azure's 429 "resource unavailable"): a wait, never an attempt spent.
CAPACITY_CODES = frozenset({"capacity_exceeded", "resource_unavailable"})
#: Seconds to wait after a capacity refusal that names no time.
CAPACITY_WAIT = 30.0

# Error codes that mean "you are out of money or quota": fatal even on a 429.
QUOTA_CODES = frozenset(
    {
        "insufficient_quota",  # OpenAI, Groq (and the emulator's quota fault)
        "billing_hard_limit_reached",
        "billing_error",  # Anthropic error.type on 402
        "contract_spend_limit_reached",  # Anthropic error.details.error_code
        "enforced_spend_limit_reached",
        "linked_organization_spend_limit_reached",
        "spend_limit_reached",
        "quota_exceeded",
    }
)

_AUTH_HINT = {
    401: "check the API key",
    403: "the key lacks permission for this model or region",
    404: "check the model name",
}


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The server's "come back in" hint, in seconds, or None.

    Read in the SDKs' own order: ``retry-after-ms`` (milliseconds), then
    ``retry-after`` as seconds (possibly fractional), then as an HTTP date.
    """
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def request_id_of(headers: Mapping[str, str] | None, body: Any = None) -> str | None:
    """The provider's id of a call: the ``request-id`` header (Anthropic), ``x-request-id``
    (OpenAI, Groq), or an error body's ``request_id`` (Anthropic's error envelope)."""
    if headers:
        for name in ("request-id", "x-request-id"):
            value = headers.get(name)
            if value:
                return str(value)
    if isinstance(body, Mapping):
        value = body.get("request_id")
        if isinstance(value, str) and value:
            return value
    return None


def error_fields(body: Any) -> tuple[str | None, str | None, str | None, str | None]:
    """``(code, type, message, param)`` of an OpenAI-shaped error body, wrapped in
    ``{"error": …}`` or not (the openai SDK unwraps it, the groq SDK does not). ``code``
    comes as a string, an integer or null; it is read as text."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    if not isinstance(body, Mapping):
        return None, None, body if isinstance(body, str) else None, None
    code = body.get("code")
    kind = body.get("type")
    message = body.get("message")
    param = body.get("param")
    return (
        str(code) if code is not None else None,
        str(kind) if kind is not None else None,
        str(message) if message is not None else None,
        str(param) if param is not None else None,
    )


def classify(
    provider: str,
    status: int | None,
    *,
    message: str | None = None,
    retry_after: float | None = None,
    code: str | None = None,
    quota: bool = False,
    kind: str | None = None,
    param: str | None = None,
    request_id: str | None = None,
) -> ProviderError:
    """The taxonomy error for one failed provider answer (see the module table).

    What a person reads is the provider's own account (:func:`describe`): its error
    type and code, its message and the parameter it names, then agac's hint, then the
    provider's request id, which is also kept on the error (``request_id``)."""
    quota = quota or (code in QUOTA_CODES)
    text = describe(provider, status, kind=kind, code=code, message=message, param=param)
    kwargs: dict[str, Any] = {"status": status, "code": code, "request_id": request_id}
    said = f" (request id {request_id})" if request_id else ""
    if status == 498 or (status == 429 and code in CAPACITY_CODES):
        return WaitError(
            text + " (the flex tier has no capacity now: agac waits and asks again)" + said,
            retry_after=retry_after if retry_after is not None else CAPACITY_WAIT,
            **kwargs,
        )
    if quota:
        return FatalError(
            text + " (quota or spend cap reached: raise the limit or wait for it to reset)" + said,
            **kwargs,
        )
    if status in (429, 529):
        if retry_after is not None:
            return WaitError(text + said, retry_after=retry_after, **kwargs)
        return RetryableError(text + said, **kwargs)
    if status is None or status in (408, 409) or status >= 500:
        return RetryableError(text + said, retry_after=retry_after, **kwargs)
    hint = _AUTH_HINT.get(status)
    return FatalError((f"{text} ({hint})" if hint else text) + said, **kwargs)


def describe(
    provider: str,
    status: int | None,
    *,
    kind: str | None = None,
    code: str | None = None,
    message: str | None = None,
    param: str | None = None,
) -> str:
    """``<provider>: HTTP <status> <type> [<code>]: <message> (param: <param>)``, each part
    only when the provider sent it; a code that only repeats the status or the type is
    left out (OpenAI's ``code`` may be the status number, or null)."""
    text = f"{provider}: HTTP {status}" if status else f"{provider}: request failed"
    if kind:
        text += f" {kind}"
    if code and code != kind and code != str(status):
        text += f" [{code}]"
    if message:
        text += f": {message}"
    if param:
        text += f" (param: {param})"
    return text


@lru_cache(maxsize=1)
def transport_errors() -> tuple[type[BaseException], ...]:
    """Network-level exception classes of the HTTP stacks under the SDKs.

    openai and anthropic run on httpx2, groq and ollama on httpx (or httpx2),
    google-genai on aiohttp when it is installed (else httpx); whichever is installed is
    included. Imported on first error only.
    """
    found: list[type[BaseException]] = [TimeoutError, ConnectionError]
    for module_name, error in (
        ("httpx", "TransportError"),
        ("httpx2", "TransportError"),
        ("aiohttp", "ClientError"),
    ):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        found.append(getattr(module, error))
    return tuple(found)


def shape_errors() -> tuple[type[BaseException], ...]:
    """What an SDK raises when an answer does not have the shape it parses: pydantic's
    ``ValidationError`` (the ollama and google-genai SDKs validate answers), a JSON body
    that does not parse. Imported on first error only."""
    found: list[type[BaseException]] = [json.JSONDecodeError]
    try:
        import pydantic
    except ImportError:  # pragma: no cover - every SDK depends on pydantic
        return tuple(found)
    found.append(pydantic.ValidationError)
    return tuple(found)


def malformed_answer(provider: str, exc: BaseException) -> RetryableError:
    """An answer of an odd shape: retryable, like a body that is not JSON; the unit fails
    (``provider_error``) once its attempts are spent, never the run."""
    detail = " ".join(str(exc).split())[:300] or type(exc).__name__
    return RetryableError(f"{provider}: the answer does not have the documented shape: {detail}")


def connection_error(provider: str, exc: BaseException) -> TransportError:
    """A timeout or a lost connection: retryable, and counted by the action's breaker."""
    detail = str(exc) or type(exc).__name__
    return TransportError(f"{provider}: connection failed or timed out: {detail}")
