"""``agac plan`` over three tiers: each llm action priced online, in batch and on flex
(none where its model is not served on flex), and for ``run_mode: auto`` the tier a run
admitted now would choose — flex when the deadline is too short for batch — with why."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import agac

from agac.testing import write_project

PRICES = """\
prices:
  openai/o4-mini: {input: 2.0, output: 8.0}
  openai/gpt-4o-mini: {input: 1.0, output: 2.0}
"""
ENV = {"OPENAI_API_KEY": "sk-test"}


def _project(root: Path, model: str, *, deadline: str = "", records: int = 3) -> None:
    workflow = (
        f"name: wf\ninput: {{path: data/in.jsonl}}\n{deadline}"
        f"defaults: {{model: {model}, max_tokens: 10}}\nactions:\n"
        "  - name: classify\n    run_mode: auto\n    auto_batch_min_records: 2\n"
        '    prompt: "Classify: {{ source.text }}"\n'
    )
    write_project(
        root,
        workflow,
        agac_yml=PRICES,
        data={"data/in.jsonl": [{"text": f"item {i}"} for i in range(records)]},
    )


def test_plan_shows_three_estimates_and_auto_choosing_flex_for_a_short_deadline(
    tmp_path: Path,
) -> None:
    _project(tmp_path, "openai/o4-mini", deadline="deadline: 2h\n")
    doc = agac("plan", "wf", "--json", cwd=tmp_path, env=ENV).json()
    classify = doc["actions"]["classify"]
    cost = classify["cost_usd"]
    assert cost["online"] > 0 and cost["flex"] == pytest.approx(cost["batch"])  # batch rate
    assert cost["flex"] == pytest.approx(cost["online"] / 2, abs=2e-6)  # derived half
    assert (classify["run_mode"], classify["mode"]) == ("auto", "flex")
    assert classify["mode_why"].startswith("deadline: the run's deadline is 2.0 h away")
    assert classify["mode_why"].endswith("openai serves o4-mini on flex at the batch price")
    assert doc["cost_usd"]["as_configured"] == pytest.approx(cost["flex"], abs=2e-6)
    assert doc["cost_usd"]["flex"] == pytest.approx(cost["flex"], abs=2e-6)
    text = agac("plan", "wf", cwd=tmp_path, env=ENV)
    assert text.code == 0, text
    assert "auto → flex" in text.out
    assert "classify: run_mode auto would choose flex now (deadline: " in text.out
    assert f"flex ${cost['flex']:.4f}" in text.out


def test_plan_auto_chooses_batch_when_the_deadline_leaves_room(tmp_path: Path) -> None:
    _project(tmp_path, "openai/o4-mini", deadline="deadline: 48h\n")
    classify = agac("plan", "wf", "--json", cwd=tmp_path, env=ENV).json()["actions"]["classify"]
    assert classify["mode"] == "batch" and classify["mode_why"].startswith("at_threshold")


def test_plan_has_no_flex_estimate_for_a_model_not_served_on_flex(tmp_path: Path) -> None:
    _project(tmp_path, "openai/gpt-4o-mini", deadline="deadline: 2h\n")
    doc = agac("plan", "wf", "--json", cwd=tmp_path, env=ENV).json()
    classify = doc["actions"]["classify"]
    assert classify["cost_usd"]["flex"] is None and doc["cost_usd"]["flex"] is None
    assert classify["mode"] == "online"
    assert classify["mode_why"].endswith("openai does not serve gpt-4o-mini on flex")
    text = agac("plan", "wf", cwd=tmp_path, env=ENV).out
    assert "flex —" in text
