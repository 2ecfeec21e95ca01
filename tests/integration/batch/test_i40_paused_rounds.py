"""Tools per record: a turn Anthropic pauses (``pause_turn``) in a loop. Online it is
continued live within the turn; in a batch it is a turn of the record's loop, continued
in the next round's batch with the conversation so far — the paused content sent back as
the assistant turn, as Anthropic documents — never live and never answered with the
paused text (Anthropic's batch API through its SDK against the emulator).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from batch_support import MODELS, counts, creates, ops, rows, run

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

TOOLS = '''\
"""Order lookups; each call appends its argument to calls.log."""

from pathlib import Path


def lookup(order_id: str) -> dict:
    """Find an order in the shop's system.

    Args:
        order_id: the order's id.
    """
    with (Path(__file__).parent / "calls.log").open("a", encoding="utf-8") as log:
        log.write(order_id + "\\n")
    return {"order": order_id, "status": "shipped"}
'''

PAUSED = {"stop": "pause_turn", "blocks": ["preamble", "server_tool_use"]}
ONE = '[[emulator calls: lookup {"order_id": "A1"}]]'


def _project(root: Path, run_mode: str) -> None:
    text = f"""name: bw
input: {{path: data/, id_field: id}}
defaults:
  model: {MODELS["anthropic"]}
  run_mode: {run_mode}
  max_tokens: 128
  retry: {{max_attempts: 2, backoff: {{initial: 10ms, max: 20ms}}}}
actions:
  - name: classify
    prompt: "Answer the customer: {{{{ source.text }}}}"
    tools: [tools.orders:lookup]
"""
    write_project(
        root,
        text,
        data={"data/a.jsonl": [{"id": "r0", "text": "where is A1? " + ONE}]},
        files={"tools/__init__.py": "", "tools/orders.py": TOOLS},
    )


def _calls(root: Path) -> list[str]:
    log = root / "tools" / "calls.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def _rounds(emulator: RunningEmulator, root: Path, limit: int = 6) -> list[Any]:
    results = [run(root)]
    while results[-1].exit_code == 75 and len(results) < limit:
        emulator.advance(120)
        results.append(run(root))
    return results


def test_i40_pause_turn_in_a_live_loop_is_continued_within_the_turn(
    emulator: RunningEmulator, project: Path
) -> None:
    """The turn after the lookup's result is paused: continued live at once."""
    _project(project, "online")
    emulator.add_fault(
        {"provider": "anthropic", "op": "chat", "nth": 2, "times": 1, "fault": {"reply": PAUSED}}
    )

    result = run(project)

    assert result.exit_code == 0, result.summary
    assert ops(emulator.stats(), "anthropic").get("chat") == 3  # call, paused, continued
    assert _calls(project) == ["A1"]
    row = rows(project)["r0"]
    # the turn's text is its legs', in order: the paused preamble, then the rest
    assert row["status"] == "answered"
    assert row["output"]["text"].startswith("I'll search for that.Emulated answer")
    assert (row["turns"], row["tool_calls"]) == (2, 1)


def test_i40_pause_turn_in_a_batch_continues_in_the_next_round_not_live(
    emulator: RunningEmulator, project: Path
) -> None:
    """Round 2 (the turn after the lookup's result) is paused: it is stored as a turn of
    the loop and round 3 sends the conversation with the paused content as the assistant
    turn; no live call."""
    _project(project, "batch")
    emulator.add_fault(
        {
            "provider": "anthropic",
            "op": "batch.create",
            "nth": 2,
            "times": 1,
            "fault": {"reply": PAUSED},
        }
    )

    last = _rounds(emulator, project)[-1]

    assert last.summary["state"] == "succeeded", last.summary
    assert creates(emulator.stats(), "anthropic") == 3  # call, paused, continued
    assert ops(emulator.stats(), "anthropic").get("chat", 0) == 0  # nothing live
    assert counts(last)["rounds"] == 3
    assert _calls(project) == ["A1"]
    assert emulator.stats()["answered"] == 3 and emulator.stats()["duplicate_answers"] == 0
    row = rows(project)["r0"]
    # as live: the paused preamble, then round 3's continuation
    assert row["status"] == "answered"
    assert row["output"]["text"].startswith("I'll search for that.Emulated answer")
    assert (row["turns"], row["tool_calls"]) == (3, 1)
    (entry,) = api.record_session("r0", project)["actions"]
    llm = [a for a in entry["attempts"] if a["kind"] == "llm"]
    assert [a["tier"] for a in llm] == ["batch", "batch", "batch"]
    assert "the next round continues it" in (llm[1]["error"] or "")
    assert [t["kind"] for t in entry["turns"]] == ["model", "tool", "model"]
    # Round 3's line: the conversation so far, the paused content as the assistant turn.
    with sqlite3.connect(project / ".agac" / "agac.db") as db:
        sent = [json.loads(r[0]) for r in db.execute("SELECT request FROM batch_items")]
    last_line = max(sent, key=lambda r: len(r["messages"]))
    paused = last_line["messages"][-1]
    assert paused["role"] == "assistant" and paused["content"] == "I'll search for that."
    assert [b["type"] for b in paused["paused"]] == ["text", "server_tool_use"]
