"""Issue 29, item 18: no single bad value may leave a run that cannot be cancelled. An older
agac took a price of ``.inf``, so the worst case it listed for a call in flight (a dispatch
mark, S1) was NaN — a value that no usage row can hold — and every ``agac cancel``, ``agac
run``, ``--new`` and ``--fresh`` then failed writing it, leaving the run ``cancelling`` for
good. Now that call is counted at $0 (with its tokens and a note saying why) and the run
ends ``cancelled``; the next run starts cleanly."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cli_support import agac

from agac import api
from agac.engine.lifecycle.admission import open_or_admit
from agac.engine.lifecycle.options import RunOptions
from agac.store.rows import Checkpoint, MarkRow
from agac.testing import write_project

WF = """\
name: wf
input: {path: data/a.jsonl, id_field: id}
defaults: {model: mock/m}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
"""


def _stuck_run(root: Path, worst: str) -> str:
    """A run left ``cancelling`` whose dispatch mark lists a call at a ``worst`` USD (the
    text an older agac stored: ``NaN``, ``Infinity``)."""
    write_project(
        root, WF, data={"data/a.jsonl": [{"id": f"r{i}", "text": f"t{i}"} for i in range(3)]}
    )
    project = api.project_of(root)
    store = api.open_store(project)
    try:
        run = open_or_admit(project, store, api.load_workflow("wf", project), RunOptions()).run
        units = f'[["r0","{"0" * 64}",4,1024,{worst}]]'
        store.checkpoint(
            Checkpoint(marks=[MarkRow(run.id, "ask", "o:0000000000", units, time.time())])
        )
        store.update_run(run.id, state="cancelling")
    finally:
        store.close()
    return run.id


@pytest.mark.parametrize("worst", ["NaN", "Infinity"])
def test_i29_18_a_run_with_a_bad_stored_cost_can_still_be_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worst: str
) -> None:
    monkeypatch.chdir(tmp_path)
    run_id = _stuck_run(tmp_path, worst)
    cancelled = agac("cancel", "wf", "--json", cwd=tmp_path)
    assert cancelled.code == 0, cancelled
    doc = cancelled.json()
    assert (doc["run_id"], doc["state"]) == (run_id, "cancelled")
    assert doc["actions"]["ask"]["reasons"] == {"cancelled": 3}
    cost = agac("cost", run_id, "--json", cwd=tmp_path)
    assert cost.code == 0, cost
    assert "NaN" not in cost.out and "Infinity" not in cost.out
    json.loads(cost.out)  # strict JSON
    store = api.open_store(api.project_of(tmp_path))
    try:
        (row,) = store.unit_usage(run_id, "r0")  # the call of unknown outcome, counted
    finally:
        store.close()
    assert (row.origin, row.cost_usd, row.input_tokens, row.output_tokens) == (
        "unknown",
        0.0,
        4,
        1024,
    )
    assert "worst-case cost was not a number" in row.error
    again = agac("run", "wf", "--json", cwd=tmp_path)
    assert again.code == 0, again
    assert again.json()["state"] == "succeeded" and again.json()["run_id"] != run_id


def test_i29_18_continuing_such_a_run_ends_it_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agac run`` finds the run ``cancelling`` (its canceller stopped half-way) and
    finishes the cancel, the same bad value notwithstanding."""
    monkeypatch.chdir(tmp_path)
    run_id = _stuck_run(tmp_path, "NaN")
    finished = agac("run", "wf", "--json", cwd=tmp_path)
    doc = json.loads(finished.out)
    assert (doc["run_id"], doc["state"]) == (run_id, "cancelled"), finished
    fresh = agac("run", "wf", "--fresh", "--json", cwd=tmp_path)
    assert fresh.code == 0 and fresh.json()["state"] == "succeeded", fresh
