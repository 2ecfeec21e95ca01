"""Shared helpers of the engine tests (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agac import api
from agac.testing import ManualClock

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


def past_deadline_after(clock: ManualClock, action: str) -> Callable[[Any], None]:
    """An ``on_progress`` listener that moves ``clock`` two hours on once ``action`` has an
    answer: a run's deadline (of an hour) then passes mid-run on any machine, however slow."""

    def listen(progress: Any) -> None:
        if progress.actions[action]["answered"] and not moved:
            moved.append(True)
            clock.advance(7200)

    moved: list[bool] = []
    return listen
