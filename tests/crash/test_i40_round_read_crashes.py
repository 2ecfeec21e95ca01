"""Tools per record in batch rounds: a SIGKILL in the middle of reading a round (R6, B6).

A real ``agac run`` process reading a round of 1,003 records (OpenAI's batch API against
the emulator) is killed with SIGKILL by ``AGAC_CRASH_AT=mid_ingest:1``: after the first
1,000 results are stored — answers, and the turns of the records whose answer called a
tool, each with its item marked read in the same transaction — and before the rest are
read. The continued runs read only what was not stored, ask no model turn twice, run each
stored turn's call once, and every record ends answered.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

from crash_support import agac

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """
name: roundread
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, run_mode: batch, max_tokens: 64, retry: {max_attempts: 2}}
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

RECORDS = 1003
#: Read before the kill (with the first 1,000 answers: a turn is not an answer) and after.
CALLERS = {0: "C0", 500: "C500", 1002: "C1002"}


def _text(j: int) -> str:
    order = CALLERS.get(j)
    if order is None:
        return f"hello {j}"
    return f'where? [[emulator calls: lookup {{"order_id": "{order}"}}]]'


def _ledger(root: Path) -> dict[str, int]:
    with sqlite3.connect(root / ".agac" / "agac.db") as db:
        rows = db.execute("SELECT kind, COUNT(*) FROM usage GROUP BY kind").fetchall()
    return {kind: n for kind, n in rows}


def test_i40_r6_sigkill_while_reading_a_round_asks_no_turn_twice_and_runs_no_call_twice(
    tmp_path: Path,
) -> None:
    rows = [{"id": f"r{j}", "text": _text(j)} for j in range(RECORDS)]
    write_project(
        tmp_path,
        WF,
        workflow_file="roundread.yml",
        data={"data/a.jsonl": rows},
        files={"tools/__init__.py": "", "tools/shop.py": TOOLS},
    )
    with RunningEmulator(batch_seconds=60) as emu:
        emu.hold_clock()  # batches progress only when advanced
        env = emu.env()
        assert agac(tmp_path, env, "run", "roundread").returncode == 75  # round 1 out
        crash = {**env, "AGAC_CRASH_AT": "mid_ingest:1"}
        for _ in range(4):  # until round 1 has ended and its reading is killed
            emu.advance(120)
            crashed = agac(tmp_path, crash, "run", "roundread")
            if crashed.returncode != 75:
                break
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        code, tries = 75, 0
        while code == 75 and tries < 6:
            done = agac(tmp_path, env, "run", "roundread", "--json")
            code, tries = done.returncode, tries + 1
            if code == 75:
                emu.advance(120)
        assert code == 0, done.stderr
        summary = json.loads(done.stdout)
        stats = emu.stats()
    assert summary["actions"]["reply"]["answered"] == RECORDS, summary
    # Round 1 once, round 2 (the three loops' second turns) once.
    assert stats["requests"]["openai"]["batch.create"] == 2
    assert stats["answered"] == RECORDS + len(CALLERS) and stats["duplicate_answers"] == 0
    log = (tmp_path / "calls.log").read_text(encoding="utf-8").split()
    assert sorted(log) == sorted(CALLERS.values())  # each stored turn's call ran once
    ledger = _ledger(tmp_path)
    assert ledger["llm"] == RECORDS + len(CALLERS), ledger  # no turn ledgered twice
    assert ledger["tool"] == len(CALLERS), ledger
    out = {r["key"]: r for r in api.export_rows("roundread", "reply", tmp_path)}
    assert {r["status"] for r in out.values()} == {"answered"}
    for j, order in CALLERS.items():
        row = out[f"r{j}"]
        assert f'"status of {order}"' in row["output"]["text"]
        assert (row["turns"], row["tool_calls"]) == (2, 1)
