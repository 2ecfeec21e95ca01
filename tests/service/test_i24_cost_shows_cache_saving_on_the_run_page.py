"""The run page of `agac serve` shows what prompt caching saved next to what batch saved,
and the mode ``run_mode: auto`` chose."""

from __future__ import annotations

from pathlib import Path

import pytest
from service_support import running_service, team_project

from agac import api
from agac.emulator.testing import RunningEmulator

WORKFLOW = """\
name: replies
input: {path: data/, id_field: id}
defaults: {model: anthropic/claude-haiku-4-5, retry: {max_attempts: 1}, run_mode: auto}
actions:
  - name: draft
    prompt: "Draft a reply to: {{ source.text }}"
"""
PRICES = """\
identity: login
prices:
  anthropic/claude-haiku-4-5: {input: 1.0, output: 5.0, cached_input: 0.1, cache_write: 1.25}
"""


def test_i24_cost_shows_cache_saving_on_the_run_page(
    emulator: RunningEmulator, tmp_path: Path
) -> None:
    root = team_project(tmp_path / "team", workflow=WORKFLOW, agac_yml=PRICES)
    emulator.add_fault(
        {
            "provider": "anthropic",
            "op": "chat",
            "fault": {"reply": {"usage": {"cache_read_tokens": 4000, "cache_write_tokens": 800}}},
        }
    )
    result = api.run("replies", root)
    assert result.summary["state"] == "succeeded"
    saved = api.cost(result.summary["run_id"], root)["cache_saved_usd"]
    assert saved == pytest.approx(2 * (4000 * 0.9 - 800 * 0.25) / 1e6, abs=1e-6)

    with running_service(root) as service:
        page = service.browser("bob").get(f"/runs/{result.summary['run_id']}").text

    assert f"caching saved ${saved:.4f} against the same tokens uncached" in page
    assert "draft: run_mode auto chose online (below_threshold: 2 units" in page
