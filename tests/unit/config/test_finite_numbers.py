"""Issue 29, item 18: every number in settings is finite. YAML's ``.inf``/``.nan`` (and an
integer past the float range) in ``agac.yml`` or a workflow are refused with a located
``invalid_value`` (file and line), as are durations too long for a float and
``--budget-usd inf``; a price table given a non-finite price in code refuses it too."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from agac.config import find_project
from agac.errors import ConfigError
from agac.providers.base import Usage
from agac.providers.pricing import MAX_PRICE, PriceTable

BASE = """
input: {path: data.jsonl}
actions:
"""


@pytest.mark.parametrize("number", [".inf", "-.inf", ".nan", ".NaN", "1" + "0" * 400])
def test_i29_18_a_price_that_is_not_finite_is_refused_with_its_line(
    tmp_path: Path, number: str
) -> None:
    (tmp_path / "agac.yml").write_text(
        f"prices:\n  openai/gpt-x:\n    input: 1\n    output: {number}\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as info:
        find_project(tmp_path)
    (problem,) = info.value.problems
    assert (problem.code, problem.file, problem.line) == ("invalid_value", "agac.yml", 4)
    assert "finite" in problem.message and "prices.openai/gpt-x.output" in problem.message


def test_i29_18_other_numbers_of_agac_yml_are_finite(tmp_path: Path) -> None:
    (tmp_path / "agac.yml").write_text(
        "providers:\n"
        "  openai: {batch_submissions_per_minute: .inf}\n"
        "  mock: {latency_ms: .inf}\n"
        "store_options: {lease_ttl: .nan}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        find_project(tmp_path)
    found = {(p.code, p.line) for p in info.value.problems}
    assert found == {("invalid_value", 2), ("invalid_provider_option", 3), ("invalid_store", 4)}


@pytest.mark.parametrize(
    ("body", "needle", "path"),
    [
        ("budget: {usd: .inf}\n", "budget:", "budget.usd"),
        ("deadline: 99999999999999999999999999999999999999d\n", "deadline:", "deadline"),
    ],
)
def test_i29_18_a_workflow_budget_or_deadline_that_is_not_finite_is_refused(
    wf, body: str, needle: str, path: str
) -> None:
    checked = wf.check(body + BASE + "  - name: a\n    model: mock/m\n    prompt: x\n")
    assert checked.workflow is None
    (problem,) = [p for p in checked.problems if p.severity == "error"]
    assert problem.file == "wf.yml" and problem.line == checked.line_of(needle), problem
    assert path in problem.message or path == "deadline", problem


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("temperature", "temperature: .nan"),
        ("rate_limit", "rate_limit: {rpm: .inf}"),
        ("retry", "retry: {backoff: {multiplier: .inf}}"),
        ("timeout", "timeout: 99999999999999999999999999999999999h"),
    ],
)
def test_i29_18_numbers_of_an_action_are_finite(wf, key: str, text: str) -> None:
    checked = wf.check(BASE + f"  - name: a\n    model: mock/m\n    prompt: x\n    {text}\n")
    errors = [p for p in checked.problems if p.severity == "error"]
    assert errors and all(p.line == checked.line_of(text.split(":")[0] + ":") for p in errors), [
        p.render() for p in checked.problems
    ]


@pytest.mark.parametrize("usd", [float("inf"), float("nan")])
def test_i29_18_budget_usd_from_the_command_line_is_finite(wf, usd: float) -> None:
    checked = wf.check(BASE + "  - name: a\n    model: mock/m\n    prompt: x\n", budget_usd=usd)
    assert "--budget-usd must be a positive finite number" in checked.one("invalid_value").message


def test_i29_18_a_price_table_refuses_a_price_that_is_not_finite() -> None:
    with pytest.raises(ConfigError) as info:
        PriceTable({"openai/gpt-x": {"input": float("inf"), "output": 1.0}})
    assert info.value.problems[0].path == "prices.openai/gpt-x.input"
    table = PriceTable({"openai/gpt-x": {"input": 1.0, "output": 2.0}})
    assert table.cost("openai/gpt-x", Usage(1_000_000, 0)) == 1.0


# --- issue 35, item 13: a price that overflows ------------------------------------------


@pytest.mark.parametrize("number", ["1.0e+308", "1.0e+10", "-1"])
def test_i35_13_a_price_a_cost_cannot_hold_is_refused_with_its_line(
    tmp_path: Path, number: str
) -> None:
    (tmp_path / "agac.yml").write_text(
        f"prices:\n  openai/gpt-x:\n    input: {number}\n    output: 1\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as info:
        find_project(tmp_path)
    (problem,) = info.value.problems
    assert (problem.code, problem.file, problem.line) == ("invalid_value", "agac.yml", 3)
    assert "prices.openai/gpt-x.input" in problem.message and "1e+09" in problem.message


def test_i35_13_a_price_table_refuses_an_overflowing_price_and_the_bound_keeps_costs_finite() -> (
    None
):
    with pytest.raises(ConfigError) as info:
        PriceTable({"openai/gpt-x": {"input": 1.0e308, "output": 1.0}})
    assert info.value.problems[0].path == "prices.openai/gpt-x.input"
    table = PriceTable({"openai/gpt-x": {"input": MAX_PRICE, "output": MAX_PRICE}})
    cost = table.cost("openai/gpt-x", Usage(10**15, 10**15, cache_write_1h_tokens=10**15))
    assert math.isfinite(cost) and math.isfinite(cost * 0)
