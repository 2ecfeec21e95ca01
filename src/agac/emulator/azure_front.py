"""Azure OpenAI's front door and content filter as the emulator answers them: the
``content_filter_results`` of an answer, the 400 of a prompt its filter refuses, and the
guard every Azure route passes (a key or an Entra token, the ``api-version`` query)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .handling import state_of

__all__ = ["azure_guard", "filter_results", "prompt_filter_error"]

_FILTER_CATEGORIES = ("hate", "self_harm", "sexual", "violence")


def filter_results(flagged: dict[str, Any] | None) -> dict[str, Any]:
    """Azure's ``content_filter_results``: each category ``safe`` and not filtered, but
    the one a ``reply.filter`` fault names (``{"category", "severity"}``)."""
    results: dict[str, Any] = {
        c: {"filtered": False, "severity": "safe"} for c in _FILTER_CATEGORIES
    }
    if flagged:
        category = str(flagged.get("category", "violence"))
        results[category] = {"filtered": True, "severity": str(flagged.get("severity", "high"))}
    return results


def prompt_filter_error(flagged: dict[str, Any] | None = None) -> dict[str, Any]:
    """Azure's refusal of a prompt by its content filter (the ``error`` of an HTTP 400, live
    or in a batch line): ``code: content_filter``, and under ``innererror`` the verdict of
    each category, ``violence`` filtered at ``medium`` unless ``flagged`` names another."""
    results = filter_results(flagged or {"category": "violence", "severity": "medium"})
    results["jailbreak"] = {"filtered": False, "detected": False}
    return {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's "
        "content management policy. Please modify your prompt and retry.",
        "type": None,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
        "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": results,
        },
    }


def azure_guard(api_version: bool, error: Any) -> Any:
    """Azure's front door on every route: an ``api-key`` header or an Entra bearer token
    (401 otherwise, or for a token :mod:`.entra` issued that has expired), and where ``api_version`` (the classic surface) the ``api-version`` query (404, as Azure
    answers a path without one)."""

    def wrap(handler: Any) -> Any:
        async def guarded(request: Request) -> Response:
            headers = request.headers
            bearer = headers.get("authorization", "").startswith("Bearer ")
            if not headers.get("api-key") and not bearer:
                return error(
                    401,
                    "401",
                    None,
                    "Access denied due to invalid subscription key or wrong API endpoint.",
                )
            token = headers.get("authorization", "")[len("Bearer ") :]
            if bearer and state_of(request).entra.expired(token):
                return error(401, "401", None, "Access denied: the Entra ID token has expired.")
            if api_version and not request.query_params.get("api-version"):
                return error(404, "404", None, "Resource not found")
            response: Response = await handler(request)
            return response

        return guarded

    return wrap
