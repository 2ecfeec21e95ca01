"""B0: the next run cancels at the provider the batches out that it no longer needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """
name: b0
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, run_mode: batch}
actions:
  - name: classify
    prompt: "PROMPT {{ source.text }}"
"""


def test_b0_batches_no_longer_needed_are_cancelled_and_needed_ones_adopted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RunningEmulator(batch_seconds=60) as emu:
        emu.hold_clock()  # batches progress only when advanced
        for k, v in emu.env().items():
            monkeypatch.setenv(k, v)
        write_project(
            tmp_path,
            WF.replace("PROMPT", "Classify:"),
            workflow_file="b0.yml",
            data={"data/a.jsonl": [{"id": f"r{i}", "text": f"t{i}"} for i in range(4)]},
        )
        first = api.run("b0", tmp_path)
        assert first.exit_code == 75 and first.summary["actions"]["classify"]["batches_out"] == 1
        # The prompt changes: the batch out asks for requests nobody needs any more.
        (tmp_path / "b0.yml").write_text(WF.replace("PROMPT", "Label:"))
        second = api.run("b0", tmp_path, new=True)
        assert second.exit_code == 75
        old = api.status(first.summary["run_id"], tmp_path)
        assert old["state"] == "cancelled"
        # Its records waited on the batch, which the next run gave up (B0): they say so.
        assert old["actions"]["classify"]["reasons"] == {"batch_abandoned": 4}
        [given_up] = [
            e
            for e in api.events(first.summary["run_id"], tmp_path)
            if e["kind"] == "batch_cancelled_unneeded"
        ]
        assert (given_up["data"]["reason"], given_up["data"]["units"]) == ("batch_abandoned", 4)
        stats = emu.stats()
        assert stats["requests"]["openai"]["batch.create"] == 2
        assert stats["requests"]["openai"].get("batch.cancel", 0) == 1
        assert second.summary["actions"]["classify"]["batches_out"] == 1
        emu.advance(120)
        done = api.run("b0", tmp_path)
        assert done.summary["state"] == "succeeded"
        assert emu.stats()["duplicate_answers"] == 0
