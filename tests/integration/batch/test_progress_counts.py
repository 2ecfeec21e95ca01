"""The live progress of a run counts each unit of an action once (docs/python.md, progress):
a run that walks its records several times in one invocation — ``--wait`` walks again
after each batch it reads — sees the outcomes it wrote, and those an earlier invocation
wrote (carried), again at every walk; they are not counted again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_support import run

from agac import api
from agac.api.progress import progress_line
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """name: bw
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, max_tokens: 64, poll_interval: 1s}
actions:
  - name: tag
    prompt: "Tag {{ source.text }}"
  - name: classify
    run_mode: batch
    dependencies: [tag]
    prompt: "Classify {{ source.text }} tagged {{ tag.text }}"
    schema:
      type: object
      properties: {label: {type: string}}
      required: [label]
      additionalProperties: false
%s
  - name: summarize
    dependencies: [classify]
    prompt: "Summarize {{ classify.label }}"
"""
JUDGED = """    checks:
      - name: judged
        judge: {model: openai/gpt-4o-mini, prompt: "Grade {{ answer | tojson }}"}
        on_fail: flag"""
DATA = {
    "data/a.jsonl": [{"id": f"a{i}", "text": f"item a{i}"} for i in range(4)],
    "data/b.jsonl": [{"id": f"b{i}", "text": f"item b{i}"} for i in range(3)],
}
RECORDS = 7


@pytest.fixture
def moving_clock(emulator: RunningEmulator) -> Iterator[None]:
    """Batch time runs 100x faster than the wall clock while ``--wait`` waits (the run's
    result does not depend on how fast: it waits until each batch has ended)."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.1):
            emulator.advance(10)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join()


def _watched(project: Path, **options: Any) -> tuple[Any, Any]:
    """Run the workflow; (its result, the live counters the run's view was given)."""
    seen: dict[str, Any] = {}
    result = run(project, on_start=lambda p, _: seen.setdefault("p", p), progress=False, **options)
    return result, seen["p"]


def _cost(progress: Any) -> float:
    return round(sum(r["cost"] for r in progress.actions.values()), 6)


def test_progress_line_counts_each_unit_once_across_walks(
    emulator: RunningEmulator, project: Path, moving_clock: None
) -> None:
    """``tag`` is settled by the first walk and seen again by the walk after the batch is
    read: the line says ``tag 7/7``, never ``tag 14/7``."""
    write_project(project, WF % "", data=DATA)

    result, progress = _watched(project, wait=True)

    assert result.exit_code == 0, result.notes
    assert {a: progress.done(a) for a in progress.actions} == dict.fromkeys(
        ("tag", "classify", "summarize"), RECORDS
    )
    # the batches read are no longer out, and what they cost is in the line's cost
    line = progress_line(progress)
    assert line.startswith("tag 7/7 · classify 7/7 · summarize 7/7 · $"), line
    assert progress.actions["classify"]["cost"] > 0
    assert _cost(progress) == pytest.approx(api.cost(result.run_id, project)["cost_usd"])


def test_carried_units_are_counted_once_however_many_walks(
    emulator: RunningEmulator, project: Path, moving_clock: None
) -> None:
    """The first invocation settles ``tag`` and pauses on the batch; the second reads it,
    judges the answers in a second batch round and walks again after each read: the
    ``tag`` units it carries are counted once, not once per walk."""
    write_project(project, WF % JUDGED, data=DATA)
    first, progress = _watched(project)
    assert first.exit_code == 75 and progress.actions["tag"]["answered"] == RECORDS

    result, progress = _watched(project, wait=True)

    assert result.exit_code == 0, result.notes
    assert result.summary["checks"]["classify"]["judged"]["passed"] == RECORDS
    for action in ("tag", "classify", "summarize"):
        assert progress.actions[action]["answered"] == RECORDS, (action, progress.actions)
        assert progress.done(action) == progress.totals[action] == RECORDS
    # the second invocation's view starts from what the first spent, then adds its batches
    assert _cost(progress) == pytest.approx(api.cost(result.run_id, project)["cost_usd"])
