"""What a content filter flagged in a chat completion (Azure OpenAI's
``content_filter_results`` on the choice and ``prompt_filter_results`` on the prompt):
the detail of a ``content_filter`` stop."""

from __future__ import annotations

from typing import Any

from agac.providers._common import pick

__all__ = ["filter_detail"]


def filter_detail(choice_results: Any, prompt_results: Any) -> str | None:
    """What Azure's content filter flagged: ``<category> (severity <level>)`` for each
    filtered category of the answer, then of the prompt (``prompt_filter_results``); None
    when nothing says filtered (another provider's content_filter stop)."""
    flagged: list[str] = []
    sources = [("answer", choice_results)]
    for entry in prompt_results or ():
        sources.append(("prompt", pick(entry, "content_filter_results")))
    for where, results in sources:
        items = results.items() if isinstance(results, dict) else _fields(results)
        for category, verdict in items:
            if pick(verdict, "filtered") is True:
                severity = pick(verdict, "severity")
                said = f" (severity {severity})" if severity else ""
                flagged.append(f"{where} {category}{said}")
    return "content filter: " + ", ".join(flagged) if flagged else None


def _fields(obj: Any) -> list[tuple[str, Any]]:
    """An SDK object's extra fields as pairs (Azure's filter results are not typed)."""
    extra = pick(obj, "model_extra")
    return list(extra.items()) if isinstance(extra, dict) else []
