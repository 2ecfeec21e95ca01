"""Issue 35 through the engine in batch: a recorded Gemini function call that ends with
``STOP`` (tests/fixtures/recorded/) answered as every item of a batch fails
``unexpected_stop``, never an empty answer, and is not asked again."""

from __future__ import annotations

import json
from pathlib import Path

from batch_support import counts, make, ops, rows, run

from agac.emulator.testing import RunningEmulator

RECORDED = Path(__file__).parents[2] / "fixtures" / "recorded"


def test_i35_4_gemini_function_call_with_stop_in_a_batch_fails_unexpected_stop(
    emulator: RunningEmulator, project: Path
) -> None:
    call = json.loads((RECORDED / "gemini_function_call_stop.json").read_text(encoding="utf-8"))
    make(project, "gemini", {"a": 2}, summarize=False)
    emulator.add_fault(
        {"provider": "gemini", "op": "batch.create", "fault": {"reply": {"body": call}}}
    )

    assert run(project).exit_code == 75
    emulator.advance(120)
    result = run(project)

    assert counts(result)["reasons"] == {"unexpected_stop": 2}
    for key, row in rows(project).items():
        assert row["status"] == "failed" and row["output"] is None, key
        assert "get_user_country" in row["detail"] and "'STOP'" in row["detail"], key
    assert "chat" not in ops(emulator.stats(), "gemini")  # never re-asked live
