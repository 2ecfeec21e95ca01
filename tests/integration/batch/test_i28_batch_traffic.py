"""Issue 28 in batches: result lines in the shapes real servers send, read by the same
rules as live answers (the emulator's ``reply`` fault on ``batch.create`` items)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from batch_support import counts, make, ops, rows, run

from agac import api
from agac.emulator.testing import RunningEmulator

PAUSED = {"stop": "pause_turn", "blocks": ["preamble", "server_tool_use"]}


def _item_fault(provider: str, custom_id: str, fault: dict[str, Any]) -> dict[str, Any]:
    return {"provider": provider, "op": "batch.create", "match": {"custom_id": custom_id},
            "fault": fault}


def _collect(emulator: RunningEmulator, project: Path) -> Any:
    assert run(project).exit_code == 75
    emulator.advance(120)
    return run(project)


def test_i28_2_a_turn_paused_in_a_batch_is_continued_live_never_the_partial_text(
        emulator: RunningEmulator, project: Path) -> None:
    make(project, "anthropic", {"a": 2}, summarize=False)
    emulator.add_fault({"provider": "anthropic", "op": "batch.create", "times": 1,
                        "fault": {"reply": PAUSED}})

    result = _collect(emulator, project)

    assert counts(result)["answered"] == 2
    assert ops(emulator.stats(), "anthropic").get("chat") == 2  # each paused item, live
    for key, row in rows(project).items():
        assert row["status"] == "answered" and row["output"]["label"] in ("a", "b", "c"), key
        attempts = [a for a in api.record_session(key, project)["actions"][0]["attempts"]]
        assert [a["tier"] for a in attempts] == ["batch", "live"]
        assert "paused in the batch, continued live" in attempts[0]["error"]


def test_i28_2_a_paused_batch_turn_that_cannot_be_continued_fails(
        emulator: RunningEmulator, project: Path) -> None:
    make(project, "anthropic", {"a": 1}, summarize=False)
    emulator.add_fault({"provider": "anthropic", "op": "batch.create", "times": 1,
                        "fault": {"reply": PAUSED}},
                       {"provider": "anthropic", "op": "chat", "fault": {"http": 400}})

    result = _collect(emulator, project)

    assert counts(result)["reasons"] == {"unexpected_stop": 1}
    (row,) = rows(project).values()
    assert "continuing it live failed" in row["detail"] and "I'll search" not in str(row["output"])


def test_i28_4_a_batch_answer_keeps_the_provider_request_id(
        emulator: RunningEmulator, project: Path) -> None:
    make(project, "openai", {"a": 2}, summarize=False)

    _collect(emulator, project)

    for key in rows(project):
        (attempt,) = api.record_session(key, project)["actions"][0]["attempts"]
        assert attempt["tier"] == "batch" and attempt["request_id"].startswith("req_")
