"""``agac plan`` and budgets through the CLI (R5): the estimate, the refusal (exit 2), an
exhausted run (exit 1) and its summary."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.testing import write_project

WF = """\
name: priced
input: {path: data/a.jsonl, id_field: id}
defaults: {model: mock/m, max_tokens: 16, max_concurrency: 2}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
"""


def _project(root: Path) -> None:
    write_project(
        root,
        WF,
        agac_yml="prices: {mock/m: {input: 1000, output: 1000}}\n",
        data={"data/a.jsonl": [{"id": i, "text": f"word {i}"} for i in range(10)]},
    )


def test_r5_plan_json_then_refusal_then_exhausted_run(tmp_path: Path) -> None:
    _project(tmp_path)
    plan = agac("plan", "priced", "--budget-usd", "0.1", "--json", cwd=tmp_path)
    assert plan.code == 0, plan
    doc = plan.json()
    assert doc["requests"] == 10 and doc["within_budget"] is False
    assert doc["actions"]["ask"]["output_tokens"] == 160
    assert agac("runs", "list", "--json", cwd=tmp_path).json() == []

    refused = agac("run", "priced", "--budget-usd", "0.1", "--json", cwd=tmp_path)
    assert refused.code == 2, refused
    assert "--allow-over-estimate" in refused.err

    ran = agac(
        "run", "priced", "--budget-usd", "0.1", "--allow-over-estimate", "--json", cwd=tmp_path
    )
    assert ran.code == 1, ran
    summary = ran.json()
    assert summary["state"] == "exhausted" and summary["next"] == "agac run priced"
    assert summary["budget"]["usd"] == 0.1 and summary["budget"]["spent_usd"] <= 0.1
    assert summary["actions"]["ask"]["reasons"]["budget_exhausted"] > 0
