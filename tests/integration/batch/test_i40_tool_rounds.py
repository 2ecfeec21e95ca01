"""Tools per record in batch rounds (OpenAI, Anthropic, Gemini and Groq batches through their
official SDKs against the emulator): the first turn of every record goes in one batch;
a record whose answer asks for tool calls gets them run and its conversation sent in the
next round's batch, round after round, until it answers or a bound ends its loop. Every
turn is stored before the next step; each call runs once; the ledger counts what the
emulator answered, at the batch tier.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from batch_support import MODELS, counts, creates, ops, rows, run

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.store.repository import Store
from agac.testing import ManualClock, write_project

TOOLS = '''\
"""Order lookups for the batch-round tests; each call appends its argument to calls.log."""

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

ONE = '[[emulator calls: lookup {"order_id": "A1"}]]'
TWO = '[[emulator calls: lookup {"order_id": "B1"}]] [[emulator calls: lookup {"order_id": "B2"}]]'


def _project(
    root: Path, provider: str, texts: dict[str, str], extra: str = "", top: str = ""
) -> None:
    text = f"""name: bw
input: {{path: data/, id_field: id}}
{top}defaults:
  model: {MODELS[provider]}
  run_mode: batch
  max_tokens: 128
  retry: {{max_attempts: 2, backoff: {{initial: 10ms, max: 20ms}}}}
actions:
  - name: classify
    prompt: "Answer the customer: {{{{ source.text }}}}"
    tools: [tools.orders:lookup]
{extra}"""
    write_project(
        root,
        text,
        data={"data/a.jsonl": [{"id": k, "text": v} for k, v in texts.items()]},
        files={"tools/__init__.py": "", "tools/orders.py": TOOLS},
    )


def _calls_log(root: Path) -> list[str]:
    log = root / "tools" / "calls.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def _rounds(emulator: RunningEmulator, root: Path, limit: int = 6) -> list[Any]:
    """Run, let the batch out end, run again, until the run ends; each run's result."""
    results = [run(root)]
    while results[-1].exit_code == 75 and len(results) < limit:
        emulator.advance(120)
        results.append(run(root))
    return results


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "groq"])
def test_i40_b14_batch_rounds_run_each_record_loop_until_it_answers(
    emulator: RunningEmulator, project: Path, provider: str
) -> None:
    _project(project, provider, {"r0": "where is A1? " + ONE, "r1": "two " + TWO, "r2": "hello"})

    results = _rounds(emulator, project)

    last = results[-1]
    assert last.summary["state"] == "succeeded", last.summary
    got = counts(last)
    assert got["answered"] == 3 and got["rounds"] == 3  # agac status shows the rounds
    # Three rounds: every record's first turn, then r0's and r1's second, then r1's third.
    assert creates(emulator.stats(), provider) == 3
    assert ops(emulator.stats(), provider).get("chat", 0) == 0  # nothing live
    assert sorted(_calls_log(project)) == ["A1", "B1", "B2"]  # each call ran once, in any order
    # The ledger holds every model turn the emulator answered, at the batch tier.
    assert emulator.stats()["answered"] == 6 and emulator.stats()["duplicate_answers"] == 0
    done = rows(project)
    shipped = json.dumps({"order": "B2", "status": "shipped"})
    assert "Tool results" in done["r0"]["output"]["text"]
    assert shipped in done["r1"]["output"]["text"]
    assert (done["r1"]["turns"], done["r1"]["tool_calls"]) == (3, 2)
    assert (done["r2"]["turns"], done["r2"]["tool_calls"]) == (1, 0)
    session = api.record_session("r1", project)
    (entry,) = session["actions"]
    llm = [a for a in entry["attempts"] if a["kind"] == "llm"]
    assert len(llm) == 3 and {a["tier"] for a in llm} == {"batch"}
    assert [t["kind"] for t in entry["turns"]] == ["model", "tool", "model", "tool"]


def test_i40_b14_batch_rounds_max_turns_exceeded_names_the_last_call(
    emulator: RunningEmulator, project: Path
) -> None:
    _project(project, "openai", {"r0": "two " + TWO}, extra="    max_turns: 2\n")

    last = _rounds(emulator, project)[-1]

    got = counts(last)
    assert got["reasons"] == {"max_turns_exceeded": 1} and got["rounds"] == 2
    assert _calls_log(project) == ["B1"]  # the call over the bound is not run
    row = rows(project)["r0"]
    assert 'lookup({"order_id": "B2"})' in row["detail"]
    assert creates(emulator.stats(), "openai") == 2


def test_i40_b14_hybrid_finishes_a_batch_loop_online(
    emulator: RunningEmulator, project: Path
) -> None:
    """A record whose first turn was read from a batch, its call run and its second turn
    sent in the next round, continues its loop online when its action goes live (B13):
    from its stored turns, the call not run again, the first turn not asked again."""
    _project(
        project,
        "openai",
        {"r0": "two " + TWO},
        extra="    hybrid: {live_after: 30s}\n    poll_interval: 5m\n",
        top="deadline: 60s\n",
    )
    clock = ManualClock()
    st = Store(f"sqlite:///{project}/.agac/agac.db", clock=clock)
    try:
        assert run(project, store=st).exit_code == 75
        emulator.advance(120)
        second = run(project, store=st)  # round 1 read, B1 run, round 2 out
        assert second.exit_code == 75 and _calls_log(project) == ["B1"]
        clock.advance(31)  # past live_after: the action goes live
        third = run(project, store=st)
    finally:
        st.close()

    assert third.summary["state"] == "succeeded", third.summary
    assert _calls_log(project) == ["B1", "B2"]
    assert creates(emulator.stats(), "openai") == 2
    assert ops(emulator.stats(), "openai").get("chat", 0) == 2  # turns 2 and 3, live
    row = rows(project)["r0"]
    assert (row["turns"], row["tool_calls"]) == (3, 2)


@pytest.mark.parametrize("effect", [False, True], ids=["tool", "effect_tool"])
def test_i40_b14_identical_requests_in_batch_rounds_each_run_their_own_loop(
    emulator: RunningEmulator, project: Path, effect: bool
) -> None:
    """Two records whose first requests are identical: each runs its own loop in the
    batch rounds (a loop's turns are its own), so each record's lookup runs — with
    ``effect:``, once per record under its own idempotency key."""
    _project(project, "openai", {"r0": "where is A1? " + ONE, "r1": "where is A1? " + ONE})
    if effect:
        path = project / "workflows" / "wf.yml"
        text = path.read_text(encoding="utf-8")
        effect_tool = "tools: [{function: tools.orders:lookup, effect: true}]"
        path.write_text(text.replace("tools: [tools.orders:lookup]", effect_tool), "utf-8")

    last = _rounds(emulator, project)[-1]

    assert last.summary["state"] == "succeeded", last.summary
    assert counts(last)["answered"] == 2
    assert _calls_log(project) == ["A1", "A1"]  # each record's call ran, once each
    # Two turns each, every one asked once for its record (the identical pair twice).
    assert emulator.stats()["answered"] == 4 and emulator.stats()["duplicate_answers"] == 2
    done = rows(project)
    assert {k: (r["turns"], r["tool_calls"]) for k, r in done.items()} == {
        "r0": (2, 1),
        "r1": (2, 1),
    }
    if effect:
        effects = api.effects_list("bw", project)
        assert sorted(e["record"] for e in effects) == ["r0", "r1"]
