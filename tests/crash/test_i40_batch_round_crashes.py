"""Tools per record in batch rounds: a SIGKILL at each step between two rounds, then the
run continued (B14, R6).

A real ``agac run`` process against the emulator (OpenAI's batch API) is killed with
SIGKILL by ``AGAC_CRASH_AT`` in the invocation that reads the first round: after the
round's turn is stored but before its batch is marked read (``before_collected``), while
the turn's call runs (``tool_called``: the function returned, its result not stored),
after the result is stored (``tool_stored``: the next round not staged), and around the
next round's submission (``before_submit``, ``after_submit``). The continued runs ask no
stored turn again (each round's batch is created once, the emulator answers each turn
once), run no stored call again (a call running at the kill may run once more: it was in
flight) and ledger every turn once.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import pytest
from crash_support import agac

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """
name: rounds
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, run_mode: batch, max_tokens: 128, retry: {max_attempts: 2}}
actions:
  - name: reply
    prompt: "Answer: {{ source.text }}"
    tools: [tools.shop:lookup]
"""

TOOLS = '''
from pathlib import Path


def lookup(order_id: str) -> str:
    """Find an order."""
    with (Path(__file__).parent.parent / "calls.log").open("a", encoding="utf-8") as log:
        log.write(order_id + "\\n")
    return "status of " + order_id
'''

TEXT = (
    'where? [[emulator calls: lookup {"order_id": "B1"}]] '
    '[[emulator calls: lookup {"order_id": "B2"}]]'
)


def _calls(root: Path) -> list[str]:
    log = root / "calls.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def _ledger(root: Path) -> dict[str, int]:
    with sqlite3.connect(root / ".agac" / "agac.db") as db:
        rows = db.execute(
            "SELECT kind, COALESCE(origin, ''), COUNT(*) FROM usage GROUP BY kind, origin"
        ).fetchall()
    return {f"{kind}:{origin}".rstrip(":"): n for kind, origin, n in rows}


@pytest.mark.parametrize(
    ("point", "rerun_calls"),
    [
        ("before_collected:1", ["B1", "B2"]),  # round 1's turn stored, its batch not marked read
        ("tool_called:1", ["B1", "B1", "B2"]),  # B1 ran, its result not stored
        ("tool_stored:1", ["B1", "B2"]),  # B1 stored, round 2 not staged
        ("before_submit:1", ["B1", "B2"]),  # round 2 staged, not sent
        ("after_submit:1", ["B1", "B2"]),  # round 2 accepted by the provider, not recorded
    ],
)
def test_i40_b14_sigkill_between_batch_rounds_redoes_nothing_stored(
    tmp_path: Path, point: str, rerun_calls: list[str]
) -> None:
    write_project(
        tmp_path,
        WF,
        workflow_file="rounds.yml",
        data={"data/a.jsonl": [{"id": "r0", "text": TEXT}]},
        files={"tools/__init__.py": "", "tools/shop.py": TOOLS},
    )
    with RunningEmulator(batch_seconds=60) as emu:
        emu.hold_clock()  # batches progress only when advanced
        env = emu.env()
        assert agac(tmp_path, env, "run", "rounds").returncode == 75  # round 1 out
        emu.advance(120)
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": point}, "run", "rounds")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        code, tries = 75, 0
        while code == 75 and tries < 6:
            done = agac(tmp_path, env, "run", "rounds", "--json")
            code, tries = done.returncode, tries + 1
            if code == 75:
                emu.advance(120)
        assert code == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["actions"]["reply"]["answered"] == 1, summary
        stats = emu.stats()
    assert stats["requests"]["openai"]["batch.create"] == 3  # one per round, never twice
    assert stats["answered"] == 3 and stats["duplicate_answers"] == 0
    assert sorted(_calls(tmp_path)) == rerun_calls
    (row,) = api.export_rows("rounds", "reply", tmp_path)
    assert '"status of B2"' in row["output"]["text"]
    assert (row["turns"], row["tool_calls"]) == (3, 2)
    ledger = _ledger(tmp_path)
    assert ledger["llm"] == 3, ledger  # each round's turn once in the ledger
    assert ledger["tool"] == 2, ledger
