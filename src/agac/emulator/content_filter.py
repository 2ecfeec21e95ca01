"""Azure OpenAI's content filter as the emulator renders it: each category's verdict
(``content_filter_results``) on an answer, and the 400 of a prompt the filter refused."""

from __future__ import annotations

from typing import Any

__all__ = ["filter_results", "prompt_filter_error"]


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
