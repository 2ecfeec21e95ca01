"""Tools per record: the provider's web search in batch (Anthropic's Message Batches and
Gemini's batch API through their official SDKs against the emulator): each batch line
offers the search in the provider's form, the answers keep their citations and every
search is in the ledger at the batch tier with its full fee, equal to the emulator's
bill. OpenAI's batches search through the Responses API: test_i40_openai_responses_batch.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from batch_support import MODELS, counts, creates, ops, rows, run

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.providers.base import Usage
from agac.providers.pricing import PriceTable
from agac.testing import write_project


def _project(root: Path, provider: str, tools: str = "[web_search]") -> None:
    text = f"""name: bw
input: {{path: data/, id_field: id}}
defaults:
  model: {MODELS[provider]}
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


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_i40_web_search_in_batch_keeps_citations_and_bills_each_search(
    emulator: RunningEmulator, project: Path, provider: str
) -> None:
    _project(project, provider)

    last = _finish(emulator, project)

    assert last.summary["state"] == "succeeded", last.summary
    assert counts(last)["answered"] == 2
    assert creates(emulator.stats(), provider) == 1
    assert ops(emulator.stats(), provider).get("chat", 0) == 0  # nothing live
    sent = [r for r in emulator.requests() if r["op"] == "batch.create"]
    assert sent, "the batch's requests"
    done = rows(project)
    assert len(done["r0"]["citations"]) == 2 and len(done["r1"]["citations"]) == 1
    searched = emulator.stats()["searches"][provider]
    # Anthropic bills each search (3), Gemini 2.5 each grounded prompt (2).
    assert searched == {"anthropic": 3, "gemini": 2}[provider]
    table = PriceTable()
    price = table.get(MODELS[provider])
    assert price is not None
    fee = dict(price.tools)["web_search"]
    attempts = [
        a
        for key in done
        for entry in api.record_session(key, project)["actions"]
        for a in entry["attempts"]
    ]
    assert {a["tier"] for a in attempts} == {"batch"}
    assert sum(a["server_tools"].get("web_search", 0) for a in attempts) == searched
    for a in attempts:
        tokens = Usage(a["input_tokens"], a["output_tokens"], a["cached_tokens"])
        searches = a["server_tools"].get("web_search", 0)
        expected = table.cost(MODELS[provider], tokens, "batch") + searches * fee
        assert a["cost_usd"] == pytest.approx(expected, abs=1e-6)


def test_i40_web_search_beside_function_tools_in_batch_rounds(
    emulator: RunningEmulator, project: Path
) -> None:
    """A loop that also searches: the search offered in every round's line, the final
    answer's citations kept."""
    tools = "[web_search, tools.orders:lookup]"
    _project(project, "anthropic", tools)
    (project / "tools").mkdir()
    (project / "tools" / "__init__.py").write_text("")
    (project / "tools" / "orders.py").write_text(
        'def lookup(order_id: str) -> dict:\n    """Find an order."""\n'
        '    return {"order": order_id}\n'
    )
    data = project / "data" / "a.jsonl"
    data.write_text(
        '{"id": "r0", "text": "order [[emulator calls: lookup {\\"order_id\\": \\"A1\\"}]]"}\n'
    )

    last = _finish(emulator, project)

    assert last.summary["state"] == "succeeded", last.summary
    got = counts(last)
    assert got["answered"] == 1 and got["rounds"] == 2
    done = rows(project)
    assert (done["r0"]["turns"], done["r0"]["tool_calls"]) == (2, 1)
    assert len(done["r0"]["citations"]) == 1
    assert emulator.stats()["searches"]["anthropic"] == 1
