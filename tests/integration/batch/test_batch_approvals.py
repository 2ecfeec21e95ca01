"""A1 with batch mode: units of a batched llm action wait for approval first; the batch
is sent with exactly the approved (and revised) requests, once."""

from __future__ import annotations

import json
from pathlib import Path

from agac import api
from agac.config import find_project, store_url
from agac.emulator.testing import RunningEmulator
from agac.store.repository import Store
from agac.testing import write_project

WF = """
name: bap
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, run_mode: batch, max_tokens: 512}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
    approval: {approvers: [ann]}
"""


def test_a1_batched_units_wait_for_approval_then_go_out_in_one_batch(
    emulator: RunningEmulator, project: Path
) -> None:
    write_project(
        project,
        WF,
        workflow_file="bap.yml",
        data={"data/a.jsonl": [{"id": f"k{i}", "text": f"item {i}"} for i in range(3)]},
    )
    first = api.run("bap", project)
    assert first.exit_code == 75 and first.summary["state"] == "awaiting_approval"
    assert first.summary["actions"]["classify"]["batches_out"] == 0
    proposals = api.approvals_list("bap", project)
    assert len(proposals) == 3 and emulator.stats()["requests"] == {}
    revised = api.revise(
        proposals[0]["id"], ["prompt=Classify carefully: item 0"], project, who="ann"
    )
    for pid in [revised["id"]] + [p["id"] for p in proposals[1:]]:
        api.approve(pid, project, who="ann")
    second = api.run("bap", project)
    assert second.exit_code == 75 and second.summary["state"] == "waiting"
    assert second.summary["actions"]["classify"]["batches_out"] == 1
    store = Store(store_url(find_project(project)))
    try:
        (batch,) = store.list_batches("bap", tenants=None)
        prompts = sorted(
            json.loads(i.request)["messages"][-1]["content"]
            for i in store.iter_batch_items(batch.key)
        )
    finally:
        store.close()
    assert prompts == ["Classify carefully: item 0", "Classify: item 1", "Classify: item 2"]
    emulator.advance(120)
    third = api.run("bap", project)
    assert third.exit_code == 0, third.notes
    assert third.summary["actions"]["classify"]["answered"] == 3
    assert len(api.approvals_list("bap", project, every=True)) == 4  # nothing asked again
