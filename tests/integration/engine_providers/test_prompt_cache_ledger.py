"""Prompt caching end to end: an action under ``cache: auto`` (the default) whose static
prefix — its system prompt and the prompt's literal head — is long enough sends its
markers on every call, and the cache reads and writes the provider reports land in the
cost ledger (``agac cost --json``) and in each attempt, on both transports; under
``cache: off`` nothing is marked or cached.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from e2e_support import MODELS, project_yml, reviews

from agac import api
from agac.testing import write_project

SYSTEM = "You label product reviews by their sentiment and give a score from 0 to 10. " * 60
HEAD = "Classify this review: "
RECORDS = 4


def _workflow(model: str, cache: str = "auto") -> str:
    return (
        "\n".join(
            [
                "name: triage",
                "input: {path: data/, id_field: id}",
                f"defaults: {{model: {model}, max_concurrency: 1, max_tokens: 64, timeout: 10s,",
                f'            cache: "{cache}"}}',
                "actions:",
                "  - name: classify",
                f'    system: "{SYSTEM}"',
                f'    prompt: "{HEAD}{{{{ source.text }}}}"',
            ]
        )
        + "\n"
    )


def _ledger(project: Path) -> tuple[int, int]:
    rows = api.cost("triage", project)["rows"]
    return sum(r["cached_tokens"] for r in rows), sum(r["cache_write_tokens"] for r in rows)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_cache_reads_and_writes_land_in_the_ledger(
    provider: str, emulator: Any, project: Path
) -> None:
    write_project(
        project,
        _workflow(f"{provider}/{MODELS[provider]}"),
        agac_yml=project_yml(),
        data={"data/reviews.jsonl": reviews(RECORDS)},
    )

    assert api.run("triage", project).summary["state"] == "succeeded"

    chats = [r for r in emulator.requests() if r["op"] == "chat"]
    assert len(chats) == RECORDS
    if provider == "anthropic":
        assert all(c["cache"]["cache_control"][0] == {"at": "system.0", "ttl": "5m"} for c in chats)
        # The first call writes the prefix (system and head); the others read it.
        prefix = math.ceil((len(SYSTEM) + len(HEAD)) / 4)
        assert _ledger(project) == ((RECORDS - 1) * prefix, prefix)
    else:
        keys = {c["cache"]["prompt_cache_key"] for c in chats}
        assert len(keys) == 1 and all(keys)  # one key for every request sharing the prefix
        cached, written = _ledger(project)
        assert written == 0 and cached >= (RECORDS - 1) * 1024
    attempts = [
        a
        for key in (f"r{i:03d}" for i in range(RECORDS))
        for entry in api.record_session(key, project)["actions"]
        for a in entry["attempts"]
    ]
    assert sum(a["cached_tokens"] for a in attempts) == _ledger(project)[0]


def test_under_cache_off_nothing_is_marked_or_cached_on_anthropic(
    emulator: Any, project: Path
) -> None:
    write_project(
        project,
        _workflow(f"anthropic/{MODELS['anthropic']}", cache="off"),
        agac_yml=project_yml(),
        data={"data/reviews.jsonl": reviews(RECORDS)},
    )

    assert api.run("triage", project).summary["state"] == "succeeded"

    assert all("cache" not in r for r in emulator.requests())
    assert _ledger(project) == (0, 0)
