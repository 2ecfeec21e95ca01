"""Shared helpers of the engine tests (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agac import api

BASIC = """
name: wf
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 8, retry: {max_attempts: 3, backoff: {initial: 10ms, max: 50ms}}}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
    schema: {type: object, properties: {label: {enum: [a, b, c]}}, required: [label]}
  - name: summarize
    dependencies: [classify]
    prompt: "Summarize {{ source.text }} labelled {{ classify.label }}"
"""


def rows(n: int, start: int = 0, *, same_text: bool = False) -> list[dict[str, Any]]:
    return [
        {"id": f"r{i:05d}", "text": "same" if same_text else f"text number {i}"}
        for i in range(start, start + n)
    ]


def run(root: Path, wf: str = "wf", **options: Any) -> Any:
    return api.run(wf, root, **options)
