"""Prompt caching in a batch, end to end: a batch action under ``cache: auto`` (the
default) with a long static prefix sends its markers in every batch request, and the
cache reads and writes of the results land in the cost ledger (``agac cost --json``) at
the batch tier."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

SYSTEM = "You label product reviews by their sentiment and give a score from 0 to 10. " * 60
RECORDS = 4
MODELS = {"anthropic": "anthropic/claude-sonnet-4-5", "openai": "openai/gpt-4o-mini"}


def _workflow(model: str) -> str:
    return (
        "\n".join(
            [
                "name: cached",
                "input: {path: data/, id_field: id}",
                f"defaults: {{model: {model}, run_mode: batch, max_tokens: 64}}",
                "actions:",
                "  - name: classify",
                f'    system: "{SYSTEM}"',
                '    prompt: "Classify: {{ source.text }}"',
            ]
        )
        + "\n"
    )


@pytest.mark.parametrize("provider", list(MODELS))
def test_batch_cache_reads_and_writes_land_in_the_ledger(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    data = [
        {"id": f"r{i}", "text": f"review {i} is {'fine' if i % 2 else 'bad'}"}
        for i in range(RECORDS)
    ]
    write_project(project, _workflow(MODELS[provider]), data={"data/a.jsonl": data})

    assert api.run("cached", project).exit_code == 75  # submitted; the batch runs
    emulator.advance(120)
    assert api.run("cached", project).summary["state"] == "succeeded"

    (create,) = [r for r in emulator.requests() if r["op"] == "batch.create"]
    assert len(create["cache"]) == RECORDS
    rows = api.cost("cached", project)["rows"]
    assert {r["tier"] for r in rows} == {"batch"}
    cached = sum(r["cached_tokens"] for r in rows)
    written = sum(r["cache_write_tokens"] for r in rows)
    if provider == "anthropic":
        assert all(
            m["cache_control"][0] == {"at": "system.0", "ttl": "5m"} for m in create["cache"]
        )
        prefix = math.ceil((len(SYSTEM) + len("Classify: ")) / 4)
        assert (cached, written) == ((RECORDS - 1) * prefix, prefix)
    else:
        keys = {m["prompt_cache_key"] for m in create["cache"]}
        assert len(keys) == 1 and all(keys)
        assert written == 0 and cached >= (RECORDS - 1) * 1024
