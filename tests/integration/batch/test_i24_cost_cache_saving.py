"""``agac cost``: what prompt caching saved, next to what batch saved — cached reads ×
(input − cached_input) less cache writes × (cache_write − input), at each call's tier.
The emulator reports the cache reads and writes a real provider would."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from batch_support import make, run

from agac import api
from agac.cli.render import print_cost
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

#: Round prices, so the saving is exact: a batch call at half of them (derived).
PRICES = """\
prices:
  anthropic/claude-haiku-4-5: {input: 1.0, output: 5.0, cached_input: 0.1, cache_write: 1.25}
  anthropic/claude-sonnet-4-5: {input: 1.0, output: 5.0, cached_input: 0.1, cache_write: 1.25}
  openai/gpt-4o-mini: {input: 1.0, output: 2.0, cached_input: 0.5}
"""
READS, WRITES = 4000, 800
PER_CALL = (READS * (1.0 - 0.1) - WRITES * (1.25 - 1.0)) / 1e6  # Anthropic, live


def _usage(provider: str, op: str, **match: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "provider": provider,
        "op": op,
        "fault": {"reply": {"usage": {"cache_read_tokens": READS, "cache_write_tokens": WRITES}}},
    }
    if match:
        rule["match"] = match
    return rule


def test_i24_cost_shows_cache_saving_of_online_calls(
    emulator: RunningEmulator, project: Path, capsys: Any
) -> None:
    make(project, "anthropic", {"a": 2}, summarize=False, agac_yml=PRICES)
    emulator.add_fault(_usage("anthropic", "chat"))
    result = run(project, run_mode="online")
    assert result.exit_code == 0
    doc = api.cost(result.summary["run_id"], project)
    assert doc["cache_saved_usd"] == pytest.approx(2 * PER_CALL, abs=1e-6)
    assert doc["batch_saved_usd"] == 0
    (row,) = doc["rows"]
    assert (row["cached_tokens"], row["cache_write_tokens"]) == (2 * READS, 2 * WRITES)
    assert row["cache_saved_usd"] == pytest.approx(2 * PER_CALL, abs=1e-6)
    print_cost(doc)
    assert f"cache saved ${2 * PER_CALL:.6f}" in capsys.readouterr().out


def test_i24_cost_shows_cache_saving_of_batch_calls_at_the_batch_price(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "anthropic", {"a": 2}, summarize=False, agac_yml=PRICES)
    for custom_id in ("r0a1", "r1a1"):
        emulator.add_fault(_usage("anthropic", "batch.create", custom_id=custom_id))
    assert run(project).exit_code == 75
    emulator.advance(120)
    done = run(project)
    assert done.exit_code == 0
    doc = api.cost(done.summary["run_id"], project)
    assert {r["tier"] for r in doc["rows"]} == {"batch"}
    assert doc["cache_saved_usd"] == pytest.approx(2 * PER_CALL / 2, abs=1e-6)
    assert doc["batch_saved_usd"] > 0


def test_i24_cost_shows_cache_saving_of_openai_cached_prompt_tokens(
    emulator: RunningEmulator, project: Path
) -> None:
    """OpenAI reports cached tokens in ``prompt_tokens_details.cached_tokens`` and bills no
    write: the saving is the reads at input − cached_input."""
    make(project, "openai", {"a": 3}, summarize=False, agac_yml=PRICES)
    emulator.add_fault(
        {
            "provider": "openai",
            "op": "chat",
            "fault": {"reply": {"usage": {"cache_read_tokens": READS}}},
        }
    )
    result = run(project, run_mode="online")
    assert result.exit_code == 0
    doc = api.cost(result.summary["run_id"], project)
    assert doc["cache_saved_usd"] == pytest.approx(3 * READS * (1.0 - 0.5) / 1e6, abs=1e-6)


def test_i24_cost_shows_cache_saving_zero_without_cache_use(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "openai", {"a": 2}, summarize=False, agac_yml=PRICES)
    result = run(project, run_mode="online")
    doc = api.cost(result.summary["run_id"], project)
    assert doc["cache_saved_usd"] == 0
    assert all("cache_saved_usd" not in r for r in doc["rows"])


def test_i24_cost_shows_cache_saving_with_one_hour_writes_at_twice_the_input(
    emulator: RunningEmulator, project: Path
) -> None:
    """An Anthropic action with ``cache_ttl: 1h``: Anthropic bills each written token at 2×
    input (the price table's cache_write is the 5-minute rate, 1.25×)."""
    make(project, "anthropic", {"a": 2}, summarize=False, agac_yml=PRICES, defaults="cache_ttl: 1h")
    emulator.add_fault(_usage("anthropic", "chat"))
    result = run(project, run_mode="online")
    assert result.exit_code == 0
    doc = api.cost(result.summary["run_id"], project)
    per_call = (READS * (1.0 - 0.1) - WRITES * (2.0 - 1.0)) / 1e6
    assert doc["cache_saved_usd"] == pytest.approx(2 * per_call, abs=1e-6)


SYSTEM = "You label product reviews by their sentiment and give a score from 0 to 10. " * 60
HEAD = "Classify this review: "


def _own_cache_run(project: Path, defaults: str = "") -> None:
    """Four records of one action on Claude Sonnet 4.5 whose long system prompt and
    literal prompt head are its static prefix; ``defaults`` is added to its defaults."""
    workflow = (
        "\n".join(
            [
                "name: triage",
                "input: {path: data/in.jsonl, id_field: id}",
                "defaults: {model: anthropic/claude-sonnet-4-5, max_concurrency: 1, max_tokens: 64"
                + defaults
                + "}",
                "actions:",
                "  - name: classify",
                f'    system: "{SYSTEM}"',
                f'    prompt: "{HEAD}{{{{ source.text }}}}"',
            ]
        )
        + "\n"
    )
    write_project(
        project,
        workflow,
        agac_yml=PRICES,
        data={"data/in.jsonl": [{"id": f"r{i}", "text": f"fine {i}"} for i in range(4)]},
    )


def test_i24_cost_shows_cache_saving_of_the_emulators_own_cache(
    emulator: RunningEmulator, project: Path
) -> None:
    """No fault: the action's static prefix (a long system prompt and the prompt's head)
    is marked for Anthropic's cache (``cache: auto``), the emulator writes it on the
    first call and reads it on the others, and ``agac cost`` prices the difference."""
    _own_cache_run(project)
    result = api.run("triage", project, progress=False)
    assert result.exit_code == 0
    doc = api.cost(result.summary["run_id"], project)
    prefix = math.ceil((len(SYSTEM) + len(HEAD)) / 4)
    (row,) = doc["rows"]
    assert (row["cached_tokens"], row["cache_write_tokens"]) == (3 * prefix, prefix)
    saved = (3 * prefix * (1.0 - 0.1) - prefix * (1.25 - 1.0)) / 1e6
    assert doc["cache_saved_usd"] == pytest.approx(saved, abs=1e-6)


def test_i24_cost_one_hour_cache_writes_are_billed_at_the_one_hour_rate_in_the_ledger(
    emulator: RunningEmulator, project: Path
) -> None:
    """``cache_ttl: 1h``: the emulator, like Anthropic, reports the written tokens as
    ``cache_creation.ephemeral_1h_input_tokens``; the ledger bills them at the 1-hour rate
    (here 2× input: the prices name no ``cache_write_1h``), not the 5-minute one."""
    _own_cache_run(project, ", cache_ttl: 1h")
    result = api.run("triage", project, progress=False)
    assert result.exit_code == 0
    (row,) = api.cost(result.summary["run_id"], project)["rows"]
    prefix = math.ceil((len(SYSTEM) + len(HEAD)) / 4)
    assert (row["cached_tokens"], row["cache_write_tokens"]) == (3 * prefix, prefix)
    billed = (
        row["input_tokens"] * 1.0 + 3 * prefix * 0.1 + prefix * 2.0 + row["output_tokens"] * 5.0
    ) / 1e6
    assert row["cost_usd"] == pytest.approx(billed, abs=1e-6)


def test_ledger_savings_price_each_call_at_its_own_context_tier(
    emulator: RunningEmulator, project: Path
) -> None:
    """Claude Sonnet 4.5 prices calls over 200,000 input tokens at a higher tier. Two batch
    calls of 150,000 cached tokens each are both under it: what batch and caching saved is
    priced per call at the base tier, never at the tier their sum would reach."""
    import sqlite3

    from agac.providers.base import Usage
    from agac.providers.pricing import PriceTable

    make(project, "anthropic/claude-sonnet-4-5", {"a": 2}, summarize=False)  # genai-prices
    for custom_id in ("r0a1", "r1a1"):
        emulator.add_fault(
            {
                "provider": "anthropic",
                "op": "batch.create",
                "match": {"custom_id": custom_id},
                "fault": {"reply": {"usage": {"cache_read_tokens": 150_000}}},
            }
        )
    assert run(project).exit_code == 75
    emulator.advance(120)
    done = run(project)
    assert done.exit_code == 0
    doc = api.cost(done.summary["run_id"], project)
    (row,) = doc["rows"]
    assert row["cached_tokens"] == 300_000 and row["model"] == "claude-sonnet-4-5"
    prices, model = PriceTable(), "anthropic/claude-sonnet-4-5"
    with sqlite3.connect(project / ".agac" / "agac.db") as db:
        calls = [
            Usage(i, o, c, w)
            for i, o, c, w in db.execute(
                "SELECT input_tokens, output_tokens, cached_tokens, cache_write_tokens FROM usage"
            )
        ]
    assert len(calls) == 2
    batch_saved = sum(prices.cost(model, u, "live") - prices.cost(model, u, "batch") for u in calls)
    cache_saved = sum(
        prices.cost(model, Usage(u.input_tokens + u.cached_tokens, u.output_tokens), "batch")
        - prices.cost(model, u, "batch")
        for u in calls
    )
    assert doc["batch_saved_usd"] == pytest.approx(batch_saved, abs=1e-6)
    assert doc["cache_saved_usd"] == pytest.approx(cache_saved, abs=1e-6)
    assert doc["cost_usd"] == pytest.approx(
        sum(prices.cost(model, u, "batch") for u in calls), abs=1e-6
    )
