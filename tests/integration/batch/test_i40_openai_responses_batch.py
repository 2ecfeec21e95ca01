"""Tools per record: OpenAI's web search in batch rounds through the Responses API (the
Batch API's ``/v1/responses`` endpoint, through the official SDK against the emulator):
every line of the file names that endpoint, the first round searches and calls the
function, the next carries the conversation so far, the answers keep their citations and
every search is in the ledger at the batch tier with its full fee, equal to the
emulator's bill."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from batch_support import counts, creates, ops, rows, run

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.providers.base import Usage
from agac.providers.pricing import PriceTable
from agac.testing import write_project

MODEL = "openai/gpt-5-mini"


def _project(root: Path, tools: str = "[web_search]") -> None:
    text = f"""name: bw
input: {{path: data/, id_field: id}}
defaults:
  model: {MODEL}
  run_mode: batch
  max_tokens: 128
  retry: {{max_attempts: 2, backoff: {{initial: 10ms, max: 20ms}}}}
actions:
  - name: classify
    prompt: "Find a source for: {{{{ source.text }}}}"
    tools: {tools}
"""
    records = [
        {"id": "r0", "text": "the tallest tower [[emulator searches: 2]]"},
        {"id": "r1", "text": "the longest river"},
    ]
    write_project(root, text, data={"data/a.jsonl": records})


def _finish(emulator: RunningEmulator, root: Path) -> Any:
    result = run(root)
    while result.exit_code == 75:
        emulator.advance(120)
        result = run(root)
    return result


def _lines(emulator: RunningEmulator) -> list[dict[str, Any]]:
    """Every line of every batch input file agac uploaded, in order."""
    out = []
    for file in emulator.state.files.values():
        if file.provider == "openai" and file.purpose == "batch":
            out += [json.loads(x) for x in file.content.decode().splitlines() if x.strip()]
    return out


def _attempts(root: Path) -> list[dict[str, Any]]:
    return [
        a
        for key in rows(root)
        for entry in api.record_session(key, root)["actions"]
        for a in entry["attempts"]
    ]


def test_i40_openai_responses_web_search_in_batch_cites_and_bills_each_search(
    emulator: RunningEmulator, project: Path
) -> None:
    _project(project, "[{web_search: {allowed_domains: [who.int]}}]")

    last = _finish(emulator, project)

    assert last.summary["state"] == "succeeded", last.summary
    assert counts(last)["answered"] == 2
    assert creates(emulator.stats(), "openai") == 1
    assert ops(emulator.stats(), "openai").get("chat", 0) == 0  # nothing live
    batches = [b for b in emulator.state.batches.values() if b.provider == "openai"]
    assert [b.info["endpoint"] for b in batches] == ["/v1/responses"]
    lines = _lines(emulator)
    assert {line["url"] for line in lines} == {"/v1/responses"}
    assert lines[0]["body"]["tools"] == [
        {"type": "web_search", "filters": {"allowed_domains": ["who.int"]}}
    ]
    done = rows(project)
    assert len(done["r0"]["citations"]) == 2 and len(done["r1"]["citations"]) == 1
    assert all("who.int" in c["url"] for r in done.values() for c in r["citations"])
    searched = emulator.stats()["searches"]["openai"]
    assert searched == 3
    table = PriceTable()
    fee = dict(table.get(MODEL).tools)["web_search"]  # type: ignore[union-attr]
    attempts = _attempts(project)
    assert {a["tier"] for a in attempts} == {"batch"}
    assert sum(a["server_tools"].get("web_search", 0) for a in attempts) == searched
    for a in attempts:
        tokens = Usage(a["input_tokens"], a["output_tokens"], a["cached_tokens"])
        searches = a["server_tools"].get("web_search", 0)
        # Tokens at the batch price, each search at its full fee.
        expected = table.cost(MODEL, tokens, "batch") + searches * fee
        assert a["cost_usd"] == pytest.approx(expected, abs=1e-6)


def test_i40_openai_responses_web_search_batch_rounds_search_then_call_a_function(
    emulator: RunningEmulator, project: Path
) -> None:
    """The first round's line searches and calls the function; the second round's line
    carries the conversation (the call and its output as input items) and answers with
    citations, searching again; the ledger holds every search of both rounds."""
    _project(project, "[web_search, tools.orders:lookup]")
    (project / "tools").mkdir()
    (project / "tools" / "__init__.py").write_text("")
    (project / "tools" / "orders.py").write_text(
        'def lookup(order_id: str) -> dict:\n    """Find an order."""\n'
        '    return {"order": order_id}\n'
    )
    (project / "data" / "a.jsonl").write_text(
        '{"id": "r0", "text": "order [[emulator calls: lookup {\\"order_id\\": \\"A1\\"}]]"}\n'
        '{"id": "r1", "text": "the longest river"}\n'
    )

    last = _finish(emulator, project)

    assert last.summary["state"] == "succeeded", last.summary
    got = counts(last)
    assert got["answered"] == 2 and got["rounds"] == 2
    assert creates(emulator.stats(), "openai") == 2
    done = rows(project)
    assert (done["r0"]["turns"], done["r0"]["tool_calls"]) == (2, 1)
    assert len(done["r0"]["citations"]) == 1 and len(done["r1"]["citations"]) == 1
    lines = _lines(emulator)
    assert {line["url"] for line in lines} == {"/v1/responses"}
    second = [line["body"] for line in lines if len(line["body"]["input"]) > 1]
    assert len(second) == 1
    kinds = [i.get("type", "message") for i in second[0]["input"]]
    assert kinds == ["message", "function_call", "function_call_output"]
    assert [t["type"] for t in second[0]["tools"]] == ["function", "web_search"]
    # r0 searched on both of its turns, r1 on its one.
    searched = emulator.stats()["searches"]["openai"]
    assert searched == 3
    assert sum(a["server_tools"].get("web_search", 0) for a in _attempts(project)) == searched
