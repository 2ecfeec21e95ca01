"""Tools per record, web search for Ollama actions: a SIGKILL in the loop of a record that
searches, then the run continued.

A real ``agac run`` process against the emulator (Ollama's chat over the lean transport
and the official SDK, Ollama's web search API at the emulator's ``/api/web_search``),
killed with SIGKILL by ``AGAC_CRASH_AT`` after the first search's result is stored
(``tool_stored``), after the search came back but before its result was stored
(``tool_called``: it was in flight and is sent once more), and after the model's turn
asking for it is stored (``turn_stored``: nothing searched yet). The continued run sends
no stored search again: the emulator's count of searches is the ledger's, each model
turn is asked once, and the answer cites both searches' pages.
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
name: ground
input: {path: data/, id_field: id}
defaults: {model: ollama/llama3.2, max_concurrency: 1, max_tokens: 4096, timeout: 10s}
actions:
  - name: claim
    prompt: "Find a source for: {{ source.text }}"
    tools: [web_search]
"""

TEXT = (
    'towers [[emulator calls: web_search {"query": "tallest tower", "max_results": 2}]] '
    '[[emulator calls: web_search {"query": "tower height", "max_results": 2}]]'
)


def _project(root: Path, transport: str) -> None:
    write_project(
        root,
        WF,
        workflow_file="ground.yml",
        agac_yml=f"providers:\n  ollama: {{transport: {transport}}}\n",
        data={"data/a.jsonl": [{"id": "r0", "text": TEXT}]},
    )


def _searches_in_ledger(root: Path) -> int:
    with sqlite3.connect(root / ".agac" / "agac.db") as db:
        rows = db.execute(
            "SELECT server_tools FROM usage WHERE kind = 'tool' AND server_tools IS NOT NULL"
        ).fetchall()
    return sum(json.loads(r[0]).get("web_search", 0) for r in rows)


@pytest.mark.parametrize(
    ("point", "searched", "transport"),
    [
        ("tool_stored:1", 2, "lean"),  # the first search stored: never sent again
        ("tool_called:1", 3, "sdk"),  # the first search was in flight: sent once more
        ("turn_stored:2", 2, "lean"),  # the second turn stored, its search not yet sent
    ],
)
def test_i40_ollama_web_search_sigkill_after_a_stored_search_does_not_search_again(
    tmp_path: Path, point: str, searched: int, transport: str
) -> None:
    _project(tmp_path, transport)
    with RunningEmulator() as emu:
        env = emu.env()
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": point}, "run", "ground")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        done = agac(tmp_path, env, "run", "ground", "--json")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["actions"]["claim"]["answered"] == 1, summary
        stats = emu.stats()
    assert stats["searches"]["ollama"] == searched, (point, stats)
    assert stats["requests"]["ollama"]["chat"] == 3  # each model turn asked once
    # Every search that was answered is billed once in the ledger, the one in flight
    # at the kill included only if its result was stored (it was not: it is not billed).
    assert _searches_in_ledger(tmp_path) == 2
    (row,) = api.export_rows("ground", "claim", tmp_path)
    assert (row["turns"], row["tool_calls"]) == (3, 2)
    urls = [c["url"] for c in row["citations"]]
    assert len(urls) == 4 and len(set(urls)) == 4
