"""Issue 28 through the engine: real provider traffic read right, live, on both transports
(the ``project`` fixture runs every test once on the lean transport and once on the SDKs).

The emulator sends the bodies real servers send (its ``reply`` fault): a paused turn, a
tool call nobody asked for, a stop value agac does not know, refusal details, every
usage field, provider request ids and error bodies as they come.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e_support import MODELS, chat_requests, fault, make_project, run

from agac import api

ANTHROPIC = f"anthropic/{MODELS['anthropic']}"
PAUSED = {"stop": "pause_turn", "blocks": ["preamble", "server_tool_use"],
          "usage": {"web_search_requests": 1}}


def _classify(project: Path, key: str = "r000") -> dict[str, Any]:
    session = api.record_session(key, project)
    (entry,) = [a for a in session["actions"] if a["action"] == "classify"]
    return entry


def test_i28_2_pause_turn_is_continued_and_each_leg_is_in_the_ledger(
        emulator: Any, project: Path) -> None:
    make_project(project, ANTHROPIC, records=1, summarize=False)
    emulator.add_fault(fault("anthropic", {"reply": PAUSED}, times=1))

    summary = run(project).summary

    classify = summary["actions"]["classify"]
    assert (classify["answered"], classify["calls"]) == (1, 2)
    assert chat_requests(emulator.stats(), "anthropic") == 2
    # The continuation sent the paused content back as the assistant turn.
    second = [r for r in emulator.requests() if r["op"] == "chat"][-1]["body"]
    last = second["messages"][-1]
    assert last["role"] == "assistant"
    assert [b["type"] for b in last["content"]] == ["text", "server_tool_use"]
    entry = _classify(project)
    assert entry["status"] == "answered" and set(entry["output"]) == {"sentiment", "score"}
    legs = entry["attempts"]
    assert [(a["attempt"], a["status"]) for a in legs] == [(1, "ok"), (1, "ok")]
    assert "pause_turn" in legs[0]["error"] and legs[1]["error"] is None
    assert all(a["output_tokens"] > 0 for a in legs)


def test_i28_2_a_turn_paused_past_the_bound_fails_unexpected_stop(
        emulator: Any, project: Path) -> None:
    make_project(project, ANTHROPIC, records=1, summarize=False)
    emulator.add_fault(fault("anthropic", {"reply": PAUSED}))

    summary = run(project).summary

    classify = summary["actions"]["classify"]
    assert classify["reasons"] == {"unexpected_stop": 1}
    assert chat_requests(emulator.stats(), "anthropic") == 5  # PAUSE_LEGS, no re-ask
    (row,) = api.export_rows("triage", "classify", project)
    assert row["reason"] == "unexpected_stop" and "pause_turn" in row["detail"]
    assert len(_classify(project)["attempts"]) == 5
