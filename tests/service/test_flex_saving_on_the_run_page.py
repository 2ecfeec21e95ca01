"""The run page of `agac serve` shows what the flex tier saved beside batch and cache
savings, and that ``run_mode: auto`` chose flex for a deadline too short for batch."""

from __future__ import annotations

from pathlib import Path

import pytest
from service_support import running_service, team_project

from agac import api
from agac.emulator.testing import RunningEmulator

WORKFLOW = """\
name: replies
input: {path: data/, id_field: id}
deadline: 2h
defaults:
  model: openai/o4-mini
  retry: {max_attempts: 1}
  run_mode: auto
  auto_batch_min_records: 2
actions:
  - name: draft
    prompt: "Draft a reply to: {{ source.text }}"
"""
PRICES = """\
identity: login
prices:
  openai/o4-mini: {input: 1.0, output: 4.0}
"""


def test_flex_saving_shows_on_the_run_page(emulator: RunningEmulator, tmp_path: Path) -> None:
    root = team_project(tmp_path / "team", workflow=WORKFLOW, agac_yml=PRICES)
    result = api.run("replies", root)
    assert result.summary["state"] == "succeeded"
    doc = api.cost(result.summary["run_id"], root)
    saved = doc["flex_saved_usd"]
    assert saved > 0 and saved == pytest.approx(doc["cost_usd"], abs=1e-6)  # half of live

    with running_service(root) as service:
        page = service.browser("bob").get(f"/runs/{result.summary['run_id']}").text

    assert f"flex saved ${saved:.4f} against live prices" in page
    assert "draft: run_mode auto chose flex (deadline: " in page
