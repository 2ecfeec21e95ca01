"""Issue "Providers, part 3": on Vertex AI the batch discount and the cache discount do not
stack. Through ``agac run`` in batch against the emulator's Vertex routes and Cloud
Storage, every answer reading from the prompt cache: the ledger's tokens are those the
jobs' output bills, and its cost is the fresh input and the output at the batch rate with
the cache hits at the live cache-hit rate (never the hit rate halved again), for Gemini
and Claude alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from claude_support import CLAUDE
from vertex_support import BUCKET, MODEL

from agac import api
from agac.providers.pricing import PriceLibrary
from agac.testing import write_project

WORKFLOW = "vcache"
HITS = 300
FILLER = " ".join(f"word{i}" for i in range(400))


def _project(root: Path, prefix: str, model: str, n: int) -> None:
    agac_yml = "providers:\n  vertex: " + json.dumps({"batch_bucket": prefix}) + "\n"
    workflow = "\n".join(
        [
            f"name: {WORKFLOW}",
            "input: {path: data/, id_field: id}",
            "defaults:",
            f"  model: vertex/{model}",
            "  run_mode: batch",
            "  max_tokens: 64",
            "actions:",
            "  - name: classify",
            '    prompt: "Classify: {{ source.text }}"',
        ]
    )
    data = {"data/a.jsonl": [{"id": f"a{i}", "text": f"item {i}: {FILLER}"} for i in range(n)]}
    write_project(root, workflow + "\n", data=data, agac_yml=agac_yml)


def _billed(emulator: Any) -> dict[str, int]:
    """Fresh input, cache hits and output tokens the jobs' output bills, summed."""
    total = {"records": 0, "fresh": 0, "hits": 0, "output": 0}
    for key, (data, _) in emulator.state.objects.items():
        if not (key.startswith(f"{BUCKET}/") and key.endswith("predictions.jsonl")):
            continue
        for raw in data.splitlines():
            response = json.loads(raw)["response"]
            total["records"] += 1
            if "usageMetadata" in response:  # Gemini: hits counted inside the prompt
                usage = response["usageMetadata"]
                hits = int(usage.get("cachedContentTokenCount", 0))
                total["fresh"] += int(usage["promptTokenCount"]) - hits
                total["output"] += int(usage["candidatesTokenCount"])
            else:  # Claude: hits apart from input_tokens
                usage = response["usage"]
                hits = int(usage.get("cache_read_input_tokens", 0))
                total["fresh"] += int(usage["input_tokens"])
                total["output"] += int(usage["output_tokens"])
            total["hits"] += hits
    return total


@pytest.mark.parametrize("model", [MODEL, CLAUDE])
def test_i41_vertex_batch_cache_hits_priced_at_the_live_hit_rate_as_billed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gcp: Any,
    prefix: str,
    emulator: Any,
    model: str,
) -> None:
    emulator.hold_clock()
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    _project(root, prefix, model, 6)
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "batch.create",
            "fault": {"reply": {"usage": {"cache_read_tokens": HITS}}},
        }
    )
    first = api.run(WORKFLOW, root)
    assert first.exit_code == 75, first.notes
    emulator.advance(3600)
    done = api.run(WORKFLOW, root)
    assert done.exit_code == 0, done.notes
    bill = _billed(emulator)
    assert bill["records"] == 6 and bill["hits"] == 6 * HITS and bill["fresh"] > 0
    [row] = [r for r in api.cost(WORKFLOW, root)["rows"] if r["provider"] == "vertex"]
    assert row["calls"] == 6
    assert (row["input_tokens"], row["output_tokens"]) == (bill["fresh"], bill["output"])
    price = PriceLibrary(cache_dir=None).lookup("vertex", model)
    assert price is not None and price.live.cached_input is not None
    batch_in = price.batch.input if price.batch else price.live.input / 2
    batch_out = price.batch.output if price.batch else price.live.output / 2
    expected = (
        bill["fresh"] * batch_in
        + bill["hits"] * price.live.cached_input
        + bill["output"] * batch_out
    ) / 1_000_000
    stacked = expected - bill["hits"] * price.live.cached_input / 2 / 1_000_000
    # The ledger keeps each call's cost to the micro-dollar: six calls, six roundings.
    assert row["cost_usd"] == pytest.approx(expected, abs=6e-6)
    assert abs(row["cost_usd"] - stacked) > 2e-5  # the hits not halved again
