"""R5 in batch mode: a batch part reserves its worst case at the batch tier before it is
submitted; a part that does not fit is not sent, its records are skipped
``budget_exhausted``, and the batches out are still collected before the run ends
``exhausted``."""

from __future__ import annotations

from pathlib import Path

from batch_support import creates, make, rows, run

from agac import api
from agac.emulator.testing import RunningEmulator

# One token costs $0.001 live, $0.0005 in a batch: a request (~7 input tokens + 64 max
# output) reserves about $0.036, so file a (2 records) fits under $0.1 and file b (3)
# then does not.
PRICED = "prices: {openai/gpt-4o-mini: {input: 1000, output: 1000}}\n"


def test_r5_batch_part_over_the_budget_is_not_sent(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "openai", {"a": 2, "b": 3}, agac_yml=PRICED, summarize=False, defaults="")
    wf = project / "workflows" / "wf.yml"
    wf.write_text(wf.read_text().replace("actions:", "budget: {usd: 0.1}\nactions:", 1))
    assert api.plan("bw", project)["within_budget"] is False
    first = run(project, allow_over_estimate=True)
    assert first.exit_code == 75  # file a's batch is out
    assert creates(emulator.stats(), "openai") == 1
    emulator.advance(120)
    final = run(project)
    assert final.summary["state"] == "exhausted"
    c = final.summary["actions"]["classify"]
    assert c["answered"] == 2 and c["reasons"] == {"budget_exhausted": 3} and c["pending"] == 0
    assert {k for k, r in rows(project).items() if r["status"] == "answered"} == {"a0", "a1"}
    assert final.summary["budget"]["spent_usd"] <= 0.1
    assert creates(emulator.stats(), "openai") == 1
