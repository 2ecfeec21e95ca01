"""A ``context_prefix`` cached end to end, with no hint set by hand: the run's assembly
marks the static prefix (``cache: auto``, the prefix past the provider's minimum), the
official SDKs and agac's lean transport send the markers to the emulator, and the cache
reads and writes land in the ledger (docs/workflow-reference.md, Prompt caching)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from e2e_support import MODELS, project_yml, reviews

from agac import api
from agac.testing import write_project

POLICY = "Label a review positive when it praises the product, negative otherwise. " * 80
HEAD = "Label this review: "
RECORDS = 4


def _workflow(model: str, cache: str) -> str:
    return (
        "\n".join(
            [
                "name: triage",
                "input: {path: data/, id_field: id}",
                f"defaults: {{model: {model}, max_concurrency: 1, max_tokens: 64, timeout: 10s}}",
                "actions:",
                "  - name: classify",
                f"    cache: {cache}",
                "    context_prefix: \"{{ read('docs/policy.md') }}\"",
                f'    prompt: "{HEAD}{{{{ source.text }}}}"',
            ]
        )
        + "\n"
    )


def _make(project: Path, provider: str, cache: str) -> None:
    write_project(
        project,
        _workflow(f"{provider}/{MODELS[provider]}", cache),
        agac_yml=project_yml(),
        data={"data/reviews.jsonl": reviews(RECORDS)},
        files={"docs/policy.md": POLICY},
    )


def _ledger(project: Path) -> tuple[int, int]:
    rows = api.cost("triage", project)["rows"]
    return sum(r["cached_tokens"] for r in rows), sum(r["cache_write_tokens"] for r in rows)


def test_i24_context_prefix_is_marked_and_cached_on_anthropic(emulator: Any, project: Path) -> None:
    _make(project, "anthropic", "auto")
    assert api.run("triage", project).summary["state"] == "succeeded"
    chats = [r for r in emulator.requests() if r["op"] == "chat"]
    assert len(chats) == RECORDS and all(c.get("cache") for c in chats)
    prefix = math.ceil(len(POLICY + "\n\n" + HEAD) / 4)
    assert _ledger(project) == ((RECORDS - 1) * prefix, prefix)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_i24_cache_off_sends_no_marker(provider: str, emulator: Any, project: Path) -> None:
    _make(project, provider, "off")
    assert api.run("triage", project).summary["state"] == "succeeded"
    assert all("cache" not in r for r in emulator.requests() if r["op"] == "chat")
