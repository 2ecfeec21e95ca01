"""Tools per record in batch rounds: a round's batch file refused by the provider (B2)
fails the records it holds with the reason, and the loops of the records in the other
files go on to their answers (OpenAI's batch API through its SDK against the emulator).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from batch_support import MODELS, creates, ops, rows, run

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


def _call(order: str) -> str:
    return f'[[emulator calls: lookup {{"order_id": "{order}"}}]]'


def _project(root: Path, provider: str) -> None:
    text = f"""name: bw
input: {{path: data/, id_field: id}}
defaults:
  model: {MODELS[provider]}
  run_mode: batch
  max_tokens: 128
  retry: {{max_attempts: 2, backoff: {{initial: 10ms, max: 20ms}}}}
actions:
  - name: classify
    prompt: "Answer the customer: {{{{ source.text }}}}"
    tools: [tools.orders:lookup]
"""
    data = {
        "data/a.jsonl": [{"id": "a0", "text": "where? " + _call("A1")}, {"id": "a1", "text": "hi"}],
        "data/b.jsonl": [{"id": "b0", "text": "where? " + _call("B1")}, {"id": "b1", "text": "yo"}],
    }
    write_project(
        root,
        text,
        data=data,
        files={"tools/__init__.py": "", "tools/orders.py": TOOLS},
    )


def _calls(root: Path) -> list[str]:
    log = root / "tools" / "calls.log"
    return sorted(log.read_text(encoding="utf-8").split()) if log.exists() else []


def _rounds(emulator: RunningEmulator, root: Path, limit: int = 6) -> list[Any]:
    results = [run(root)]
    while results[-1].exit_code == 75 and len(results) < limit:
        emulator.advance(120)
        results.append(run(root))
    return results


REFUSALS = [
    ("openai", "batch.create", {"http": 429, "code": "insufficient_quota"}),
    ("openai", "file.upload", {"http": 400, "message": "the file is not valid JSONL"}),
    ("anthropic", "batch.create", {"http": 400, "message": "bad request in the file"}),
]


@pytest.mark.parametrize(
    ("provider", "op", "fault"), REFUSALS, ids=["openai-quota", "openai-upload", "anthropic-400"]
)
def test_i40_b2_a_refused_round_file_fails_its_records_and_other_loops_go_on(
    emulator: RunningEmulator, project: Path, provider: str, op: str, fault: dict[str, Any]
) -> None:
    """Round one sends both files; the third upload or create is the first file of round
    two, refused: its record fails ``batch_refused`` after its first turn and its call
    (each run once), while the other file's round is sent; the next run answers both."""
    refused_create = 1 if op == "batch.create" else 0  # a refused upload creates nothing
    _project(project, provider)
    emulator.add_fault({"provider": provider, "op": op, "nth": 3, "times": 1, "fault": fault})

    first = _rounds(emulator, project)[-1]

    # As any refused file (B2): the action fails naming it, the round out for the other
    # file stays out (B0), nothing cancelled.
    assert first.exit_code == 1, first.summary
    assert creates(emulator.stats(), provider) == 3 + refused_create  # two files, two rounds
    assert ops(emulator.stats(), provider).get("batch.cancel", 0) == 0
    done = rows(project)
    assert {done[k]["status"] for k in ("a1", "b1")} == {"answered"}
    failed = [k for k in ("a0", "b0") if done[k]["status"] == "failed"]
    assert len(failed) == 1, {k: (done[k]["status"], done[k]["reason"]) for k in done}
    (refused,) = failed
    other = "b0" if refused == "a0" else "a0"
    assert done[refused]["reason"] == "batch_refused"
    assert f"{refused[0]}.jsonl" in done[refused]["detail"], done[refused]
    assert (done[other]["status"], done[other]["reason"]) == ("skipped", "batch_outstanding")
    assert _calls(project) == ["A1", "B1"]  # each record's call ran once

    # The next run sends the refused round again (R1) and adopts the one out: both loops
    # end answered, from their stored turns.
    emulator.advance(120)
    last = _rounds(emulator, project)[-1]

    assert last.exit_code == 0, last.summary
    assert creates(emulator.stats(), provider) == 4 + refused_create  # the refused round again
    done = rows(project)
    assert {k: r["status"] for k, r in done.items()} == dict.fromkeys(done, "answered")
    for key in ("a0", "b0"):
        shipped = json.dumps({"order": key[0].upper() + "1", "status": "shipped"})
        assert shipped in done[key]["output"]["text"]
        assert (done[key]["turns"], done[key]["tool_calls"]) == (2, 1), key
    assert _calls(project) == ["A1", "B1"]  # no stored call run again
    # Every model turn asked once: four first turns, two second turns.
    assert emulator.stats()["answered"] == 6
    assert emulator.stats()["duplicate_answers"] == 0
