"""A workflow whose Gemini action asks for an explicit context cache (``cache: on`` and a
``context_prefix`` over Gemini Flash's 1,024-token minimum), for the context cache tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agac.testing import write_project

SYSTEM = "You label product reviews by the policy below."
PREFIX = "Policy. " + " ".join(
    f"Clause {i}: reviews that mention item {i} are neutral." for i in range(120)
)
"""The action's ``context_prefix``: over 1,024 tokens."""


def workflow(
    model: str = "gemini/gemini-2.5-flash",
    *,
    run_mode: str = "online",
    concurrency: int = 2,
    cache: str = "on",
) -> str:
    lines = [
        "name: cached",
        "input: {path: data/, id_field: id}",
        "defaults:",
        f"  model: {model}",
        f"  max_concurrency: {concurrency}",
        "  max_tokens: 64",
        "  retry: {max_attempts: 2, backoff: {initial: 10ms, max: 20ms}}",
        f"  run_mode: {run_mode}",
        "actions:",
        "  - name: classify",
        f'    cache: "{cache}"',
        f"    system: {SYSTEM!r}",
        f"    context_prefix: {PREFIX!r}",
        "    prompt: 'Review: {{ source.text }}'",
    ]
    return "\n".join(lines) + "\n"


def make_project(root: Path, records: int = 4, transport: str = "lean", **options: Any) -> Path:
    data = [{"id": f"r{i:03d}", "text": f"review {i}"} for i in range(records)]
    return write_project(
        root,
        workflow(**options),
        workflow_file="cached.yml",
        agac_yml=f"providers:\n  gemini: {{transport: {transport}}}\n",
        data={"data/reviews.jsonl": data},
    )
