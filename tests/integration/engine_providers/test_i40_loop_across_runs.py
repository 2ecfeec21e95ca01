"""Tools per record: a loop an earlier run left unfinished is carried into the next run
(R6). A record whose second turn was refused fails in its run with its first turn and its
call stored; a retry (a new run) takes the loop up from those steps — the first turn
not asked again, the call not run again — and ``--fresh`` starts it anew (online, on
OpenAI's protocol through the emulator, on both transports).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e_support import project_yml

from agac import api
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

WF = """name: support
input: {path: data/, id_field: id}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 256
  timeout: 10s
  retry: {max_attempts: 1}
actions:
  - name: reply
    prompt: "Answer the customer: {{ source.text }}"
    tools: [tools.orders:lookup]
"""

TEXT = 'where is A1? [[emulator calls: lookup {"order_id": "A1"}]]'


def _calls(root: Path) -> list[str]:
    log = root / "tools" / "calls.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def _chats(emulator: Any) -> int:
    return int(emulator.stats()["requests"]["openai"].get("chat", 0))


def _row(root: Path) -> dict[str, Any]:
    (row,) = api.export_rows("support", "reply", root)
    return row


def test_i40_r6_a_loop_left_unfinished_is_carried_into_the_next_run(
    emulator: Any, project: Path
) -> None:
    write_project(
        project,
        WF,
        agac_yml=project_yml(),
        data={"data/in.jsonl": [{"id": "r0", "text": TEXT}]},
        files={"tools/__init__.py": "", "tools/orders.py": TOOLS},
    )
    emulator.add_fault(
        {"provider": "openai", "op": "chat", "nth": 2, "times": 1, "fault": {"http": 400}}
    )

    first = api.run("support", project)

    assert first.summary["state"] == "failed"
    assert _row(project)["status"] == "failed"
    assert _calls(project) == ["A1"] and _chats(emulator) == 2  # turn 1, turn 2 refused

    again = api.retry("support", project)  # a new run of the failed records

    assert again.summary["run_id"] != first.summary["run_id"]
    assert again.summary["state"] == "succeeded", again.summary
    assert _chats(emulator) == 3  # only the turn after the stored call
    assert _calls(project) == ["A1"]  # the stored call not run again
    row = _row(project)
    assert '"status": "shipped"' in row["output"]["text"]
    assert (row["turns"], row["tool_calls"]) == (2, 1)

    fresh = api.run("support", project, new=True, fresh=True)

    assert fresh.summary["state"] == "succeeded", fresh.summary
    assert _chats(emulator) == 5 and _calls(project) == ["A1", "A1"]  # anew
