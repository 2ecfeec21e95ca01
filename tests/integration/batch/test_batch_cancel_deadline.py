"""``agac cancel`` and R4 deadlines on a run with batches out."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from batch_support import WORKFLOW, batches, make, ops, run, store

from agac import api
from agac.emulator.testing import RunningEmulator


def test_cancel_cancels_batches_out_at_the_provider(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "openai", {"a": 2, "b": 1})
    first = run(project)
    assert first.exit_code == 75
    result = api.cancel(WORKFLOW, project)
    s = result.summary
    assert s["state"] == "cancelled"
    assert s["actions"]["classify"]["reasons"] == {"batch_cancelled": 3}
    assert s["actions"]["summarize"]["reasons"] == {"cancelled": 3}
    assert ops(emulator.stats(), "openai").get("batch.cancel", 0) == 2
    assert {b.state for b in batches(project)} == {"cancelled"}
    # B7: agac retry sends the records of the cancelled batches again
    retried = api.retry(WORKFLOW, project)
    assert retried.exit_code == 75 and retried.summary["retry_of"] == s["run_id"]
    emulator.advance(120)
    done = run(project).summary
    assert done["state"] == "succeeded" and done["actions"]["classify"]["answered"] == 3


def test_r4_deadline_passed_while_batches_are_out(emulator: RunningEmulator, project: Path) -> None:
    make(project, "openai", {"a": 2})
    wf = project / "workflows" / "wf.yml"
    wf.write_text(wf.read_text().replace("actions:", "deadline: 1h\nactions:", 1))
    first = run(project)
    assert first.exit_code == 75
    with store(project) as s:
        row = s.get_run(first.summary["run_id"])
        s.update_run(row.id, settings=replace(row.settings, deadline_at=time.time() - 1))
    ended = run(project).summary
    assert ended["state"] == "timed_out"
    assert ended["actions"]["classify"]["reasons"] == {"batch_outstanding": 2}
    assert ended["actions"]["summarize"]["reasons"] == {"batch_outstanding": 2}
    # the batch stays out (B0): the next run adopts it instead of sending again
    emulator.advance(120)
    nxt = run(project).summary
    assert nxt["state"] == "succeeded" and nxt["actions"]["classify"]["calls"] == 0
