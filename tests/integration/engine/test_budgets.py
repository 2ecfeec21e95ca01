"""R5 budgets and ``agac plan``, through the library API, on the priced mock provider."""

from __future__ import annotations

import pytest
from engine_helpers import BASIC, run

from agac import api
from agac.errors import RefusedError

# USD per million tokens: one token costs $0.001, so small runs cost cents.
PRICED = "prices: {mock/m1: {input: 1000, output: 1000}}\n"
MAX16 = BASIC.replace("max_concurrency: 8,", "max_concurrency: 4, max_tokens: 16,")


def _budget(usd: float) -> str:
    return MAX16.replace("actions:", f"budget: {{usd: {usd}}}\nactions:", 1)


def test_r5_plan_estimates_without_sending_and_counts_reusable_answers(project, make) -> None:
    make(project, MAX16, agac_yml=PRICED)
    plan = api.plan("wf", project)
    assert api.list_runs(None, project) == []  # nothing admitted, nothing sent
    c, s = plan["actions"]["classify"], plan["actions"]["summarize"]
    assert plan["records"] == 20 and c["units"] == 20 and c["requests"] == 20
    assert s["requests"] == 20 and c["reusable"] == 0
    assert c["output_tokens"] == 20 * 16 and c["input_tokens"] > 0
    assert plan["cost_usd"]["online"] > 0
    assert plan["cost_usd"]["batch"] == pytest.approx(plan["cost_usd"]["online"] / 2)
    first = run(project)
    assert first.summary["state"] == "succeeded"
    again = api.plan("wf", project)
    assert again["reusable"] == 40 and again["requests"] == 0
    assert again["cost_usd"]["online"] == 0
    # the estimate is a worst case: what was paid stays below it
    assert first.summary["cost_usd"] <= plan["cost_usd"]["online"] + 1e-9


def test_r5_admission_refuses_a_run_estimated_over_its_budget(project, make) -> None:
    make(project, _budget(0.05), agac_yml=PRICED)
    with pytest.raises(RefusedError) as info:
        run(project)
    assert info.value.exit_code == 2 and "--allow-over-estimate" in str(info.value)
    assert api.list_runs(None, project) == []
    # the per-run cap wins over the file's
    assert run(project, budget_usd=100.0).summary["state"] == "succeeded"


def test_r5_exhausted_run_stops_sending_and_skips_units_never_sent(project, make) -> None:
    make(project, _budget(0.2), agac_yml=PRICED)
    plan = api.plan("wf", project)
    assert not plan["within_budget"]
    result = run(project, allow_over_estimate=True)
    s = result.summary
    assert s["state"] == "exhausted" and result.exit_code == 1
    assert s["budget"]["spent_usd"] <= 0.2 + 1e-9
    c = s["actions"]["classify"]
    assert c["answered"] > 0 and c["reasons"].get("budget_exhausted", 0) > 0
    for a in s["actions"].values():
        assert a["answered"] + a["failed"] + a["skipped"] == 20 and a["pending"] == 0
        assert set(a["reasons"]) <= {"budget_exhausted"}
    # units never sent were never called: every call is an answered unit
    assert sum(a["calls"] for a in s["actions"].values()) == sum(
        a["answered"] for a in s["actions"].values()
    )


def test_r5_tokens_cap(project, make) -> None:
    wf = MAX16.replace("actions:", "budget: {tokens: 300}\nactions:", 1)
    make(project, wf, agac_yml=PRICED)
    s = run(project, allow_over_estimate=True).summary
    assert s["state"] == "exhausted"
    assert 0 < s["budget"]["spent_tokens"] <= 300


def test_r5_a_new_run_with_more_budget_reuses_what_was_paid(project, make) -> None:
    make(project, _budget(0.2), agac_yml=PRICED)
    first = run(project, allow_over_estimate=True).summary
    assert first["state"] == "exhausted"
    second = run(project, budget_usd=100.0).summary
    assert second["state"] == "succeeded"
    answered_before = first["actions"]["classify"]["answered"]
    assert second["actions"]["classify"]["reused"] == answered_before


def test_r5_retry_keeps_the_original_remaining_budget(project, make, monkeypatch) -> None:
    wf = _budget(5).replace("retry: {max_attempts: 3", "retry: {max_attempts: 1")
    make(project, wf, agac_yml=PRICED)
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0.4")
    first = run(project).summary
    assert first["state"] == "partial"
    spent = first["budget"]["spent_usd"]
    assert spent > 0
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0")
    # the file's budget changed; the retry keeps the original's
    (project / "workflows/wf.yml").write_text(wf.replace("usd: 5", "usd: 500"))
    retried = api.retry("wf", project).summary
    assert retried["retry_of"] == first["run_id"]
    assert retried["budget"]["usd"] == 5
    assert retried["budget"]["spent_usd"] == pytest.approx(spent + retried["cost_usd"])


def test_r5_run_without_budget_has_no_budget_in_its_summary(project, make) -> None:
    make(project, MAX16, agac_yml=PRICED)
    s = run(project).summary
    assert "budget" not in s and s["state"] == "succeeded"
