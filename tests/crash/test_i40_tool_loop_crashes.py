"""Tools per record: a SIGKILL at each step of a tool loop, then the run continued.

A real ``agac run`` process against the emulator (OpenAI's ``tool_calls``, the official
SDK's transport and the lean one alike), killed with SIGKILL by ``AGAC_CRASH_AT`` after a
model turn is stored (``turn_stored``), during a tool (``tool_called``: the function
returned, its result not yet stored) and after a tool result is stored (``tool_stored``).
The continued run asks no stored model turn again and computes no stored tool result
again: the emulator sees each of the loop's three turns once, each call runs once (a call
that was running at the kill may run once more: it was in flight), and the answer is the
one an uninterrupted run gives. Every model turn is in the ledger once (a call the
dispatch marks list as possibly sent at the kill adds at most one row of unknown outcome).
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
name: loop
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, max_concurrency: 1, max_tokens: 128, timeout: 10s}
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
    'where? [[emulator calls: lookup {"order_id": "A1"}]] '
    '[[emulator calls: lookup {"order_id": "A2"} | lookup {"order_id": "A3"}]]'
)


def _project(root: Path, transport: str) -> None:
    write_project(
        root,
        WF,
        workflow_file="loop.yml",
        agac_yml=f"providers:\n  openai: {{transport: {transport}}}\n",
        data={"data/a.jsonl": [{"id": "r0", "text": TEXT}]},
        files={"tools/__init__.py": "", "tools/shop.py": TOOLS},
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
    ("point", "rerun_calls", "transport"),
    [
        ("turn_stored:1", ["A1", "A2", "A3"], "lean"),  # turn 1 stored, its call not run
        ("tool_called:1", ["A1", "A1", "A2", "A3"], "lean"),  # A1 ran, its result not stored
        ("tool_stored:1", ["A1", "A2", "A3"], "lean"),  # A1 stored, turn 2 not asked
        ("turn_stored:2", ["A1", "A2", "A3"], "sdk"),  # turn 2 stored, A2 and A3 not run
    ],
)
def test_i40_sigkill_in_a_tool_loop_redoes_nothing_stored(
    tmp_path: Path, point: str, rerun_calls: list[str], transport: str
) -> None:
    _project(tmp_path, transport)
    with RunningEmulator() as emu:
        env = emu.env()
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": point}, "run", "loop")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        asked_before = emu.stats()["requests"]["openai"]["chat"]
        done = agac(tmp_path, env, "run", "loop", "--json")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["actions"]["reply"]["answered"] == 1, summary
        asked = emu.stats()["requests"]["openai"]["chat"]
    assert asked == 3, (point, asked_before, asked)  # each turn once: none asked again
    assert sorted(_calls(tmp_path)) == rerun_calls
    (row,) = api.export_rows("loop", "reply", tmp_path)
    assert "Tool results: " in row["output"]["text"]
    for order in ("A1", "A2", "A3"):
        assert f'"status of {order}"' in row["output"]["text"]
    ledger = _ledger(tmp_path)
    assert ledger["llm"] == 3 and ledger.get("llm:unknown", 0) <= 1, ledger
    assert ledger["tool"] == 3, ledger  # each stored result once in the ledger
