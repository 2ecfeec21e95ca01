"""Tools per record: OpenAI's web search in batch rounds through the Responses API, killed
with SIGKILL between two rounds and continued (B14, R6). A real ``agac run`` process
against the emulator: the first round's line searches and asks for a call; the kill comes
after that turn is stored but before its batch is marked read, or once the next round's
batch is accepted but not recorded. The continued runs create each round's batch once,
have no turn answered twice, run the call once, and ledger every search the emulator
billed, once."""

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
defaults: {model: openai/gpt-5-mini, run_mode: batch, max_tokens: 128, retry: {max_attempts: 2}}
actions:
  - name: reply
    prompt: "Answer: {{ source.text }}"
    tools: [{web_search: {allowed_domains: [who.int]}}, tools.shop:lookup]
"""

TOOLS = '''
from pathlib import Path


def lookup(order_id: str) -> str:
    """Find an order."""
    with (Path(__file__).parent.parent / "calls.log").open("a", encoding="utf-8") as log:
        log.write(order_id + "\\n")
    return "status of " + order_id
'''

TEXT = 'where? [[emulator calls: lookup {"order_id": "B1"}]]'


def _searches(root: Path) -> int:
    with sqlite3.connect(root / ".agac" / "agac.db") as db:
        rows = db.execute("SELECT server_tools FROM usage WHERE server_tools IS NOT NULL")
        return sum(json.loads(text).get("web_search", 0) for (text,) in rows)


@pytest.mark.parametrize("point", ["before_collected:1", "after_submit:1"])
def test_i40_openai_responses_sigkill_between_search_rounds_redoes_nothing(
    tmp_path: Path, point: str
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
        assert json.loads(done.stdout)["actions"]["reply"]["answered"] == 1
        stats = emu.stats()
        endpoints = {b.info["endpoint"] for b in emu.state.batches.values()}
    assert endpoints == {"/v1/responses"}
    assert stats["requests"]["openai"]["batch.create"] == 2  # one per round, never twice
    assert stats["answered"] == 2 and stats["duplicate_answers"] == 0
    assert (tmp_path / "calls.log").read_text(encoding="utf-8").split() == ["B1"]
    (row,) = api.export_rows("rounds", "reply", tmp_path)
    assert (row["turns"], row["tool_calls"]) == (2, 1)
    assert row["citations"] and all("who.int" in c["url"] for c in row["citations"])
    # A search on each round's turn, each billed once and ledgered once.
    assert stats["searches"]["openai"] == 2 == _searches(tmp_path)
