"""The ``web_search`` function a model is offered when agac runs the search itself (a
provider whose spec's ``web_search.in_loop`` is set: Ollama), and what one call of it
asks for.

The model gives a ``query`` and may give ``max_results`` (1 to 10, 5 when left out, as
Ollama's API defaults). Its description, name and schema are fixed: they are part of
every request of the action and so of its fingerprint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agac.providers.base import ToolDef
from agac.providers.servertools import MAX_RESULTS, SEARCH_TOOL

__all__ = ["DEFAULT_RESULTS", "SEARCH_DEF", "SearchAsked", "read_search_call"]

DEFAULT_RESULTS = 5

SEARCH_DEF = ToolDef(
    SEARCH_TOOL,
    "Search the web. Returns the pages found, each with its title, url and content.",
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for."},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS,
                "description": f"How many results to return (default {DEFAULT_RESULTS}).",
            },
        },
        "required": ["query"],
    },
)


@dataclass(frozen=True, slots=True)
class SearchAsked:
    """One ``web_search`` call's arguments, read."""

    query: str
    max_results: int = DEFAULT_RESULTS


def read_search_call(arguments: str) -> SearchAsked | str:
    """The search the JSON ``arguments`` ask for, or why they cannot be searched (told to
    the model)."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError as exc:
        return f"the arguments are not JSON: {exc}"
    if not isinstance(args, dict):
        return "the arguments must be a JSON object"
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return "give the search as a non-empty string in 'query'"
    n = args.get("max_results", DEFAULT_RESULTS)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_RESULTS:
        return f"'max_results' must be an integer from 1 to {MAX_RESULTS}"
    return SearchAsked(query.strip(), n)
