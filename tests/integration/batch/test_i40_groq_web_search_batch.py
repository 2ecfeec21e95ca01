"""Tools per record: web search on Groq in batch (Groq's Batch API through the official
``groq`` SDK against the emulator). Groq's batch models include its GPT-OSS models, and
its docs say nothing against their browser search there: each batch line offers
``browser_search``, the answers keep the sources of their ``executed_tools`` as citations
and every search is in the ledger at the batch tier with its full fee (a search is not
discounted with the tokens), equal to the emulator's bill. Its Compound systems are not
batch models: refused at validation (tests/unit/config/test_i40_groq_web_search_config.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import groq
import pytest
from batch_support import counts, creates, ops, rows, run

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.providers.base import Usage
from agac.providers.pricing import PriceTable
from agac.testing import write_project

MODEL = "groq/openai/gpt-oss-120b"


def _project(root: Path) -> None:
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
    tools: [web_search]
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


def test_i40_groq_web_search_in_batch_keeps_citations_and_bills_each_search(
    emulator: RunningEmulator, project: Path
) -> None:
    _project(project)

    last = _finish(emulator, project)

    assert last.summary["state"] == "succeeded", last.summary
    assert counts(last)["answered"] == 2
    assert creates(emulator.stats(), "groq") == 1
    assert ops(emulator.stats(), "groq").get("chat", 0) == 0  # nothing live
    uploaded = [r for r in emulator.requests() if r["op"] == "file.upload"]
    assert len(uploaded) == 1
    done = rows(project)
    assert len(done["r0"]["citations"]) == 2 and len(done["r1"]["citations"]) == 1
    assert all(c["cited_text"] for row in done.values() for c in row["citations"])
    searched = emulator.stats()["searches"]["groq"]
    assert searched == 3
    table = PriceTable()
    price = table.get(MODEL)
    assert price is not None
    fee = dict(price.tools)["web_search"]
    assert fee == 0.005
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
        expected = table.cost(MODEL, tokens, "batch") + searches * fee
        assert a["cost_usd"] == pytest.approx(expected, abs=1e-6)
        # The tokens at the batch rate, the searches at the full fee.
        assert table.cost(MODEL, tokens, "batch") < table.cost(MODEL, tokens, "live")


def test_i40_groq_web_search_batch_lines_offer_browser_search(
    emulator: RunningEmulator, project: Path
) -> None:
    _project(project)

    assert _finish(emulator, project).summary["state"] == "succeeded"

    # The batch's input file as Groq keeps it, read back through the official SDK.
    client = groq.Groq(api_key="gsk-test", base_url=emulator.url)
    lines = [
        json.loads(line)
        for f in client.files.list().data
        for line in client.files.content(f.id).text().splitlines()
        if line.strip() and f.purpose == "batch"
    ]
    assert len(lines) == 2
    for line in lines:
        assert line["url"] == "/v1/chat/completions"
        assert line["body"]["tools"] == [{"type": "browser_search"}]
        assert "web_search_options" not in line["body"]
