"""``run_mode: flex`` end to end (docs/providers.md, Tiers), on both transports: every call
of a flex action asks for the flex tier, the ledger carries tier ``flex`` at the price its
provider bills flex at (OpenAI and Gemini: the batch rate; Groq: the on-demand rate), and
``agac cost`` shows what flex saved beside batch and cache savings; a capacity refusal in
a run waits without spending an attempt; ``flex_fallback_after`` sends what flex has not
answered by then at the standard tier (an injected clock moves past it)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import e2e_support
import pytest
from click.testing import CliRunner
from e2e_support import fault, project_yml, reviews

from agac import api
from agac.cli.main import cli
from agac.providers.base import Usage
from agac.providers.pricing import PriceTable
from agac.store.repository import Store
from agac.testing import ManualClock, write_project

RECORDS = 3
FLEX_MODELS = {
    "openai": "o4-mini",
    "azure": "gpt-4o-mini-batch",
    "gemini": "gemini-2.5-flash",
    "groq": "llama-3.3-70b-versatile",
}
#: Azure deployments are priced by the project (their names are the user's own).
AZURE_PRICE = {"azure/gpt-4o-mini-batch": {"input": 0.15, "output": 0.6}}
#: Each provider's capacity refusal on the flex tier, with a short wait named.
REFUSALS = {
    "openai": {"http": 429, "code": "resource_unavailable", "retry_after": 0.05},
    "azure": {"http": 429, "code": "resource_unavailable", "retry_after": 0.05},
    "gemini": {"http": 503, "retry_after": 0.05},
    "groq": {"http": 498, "code": "capacity_exceeded", "retry_after": 0.05},
}
#: The body field that asks for the tier (Gemini's REST body is camelCase).
FIELD = {"gemini": "serviceTier"}
ONE_ATTEMPT = "{max_attempts: 1, backoff: {initial: 10ms, max: 20ms}}"


def _workflow(model: str, *, mode: str = "flex", extra: str = "", top: str = "") -> str:
    return (
        "\n".join(
            [
                "name: triage",
                "input: {path: data/, id_field: id}",
                *([top] if top else []),
                "defaults:",
                f"  model: {model}",
                f"  run_mode: {mode}",
                "  max_tokens: 64",
                "  max_concurrency: 2",
                "  timeout: 10s",
                f"  retry: {ONE_ATTEMPT}",
                *(f"  {line}" for line in extra.splitlines() if line.strip()),
                "actions:",
                "  - name: classify",
                '    prompt: "Classify this review: {{ source.text }}"',
                (
                    "    schema: {type: object, properties: {label: {type: string}},"
                    " required: [label], additionalProperties: false}"
                ),
            ]
        )
        + "\n"
    )


def _make(project: Path, model: str, **options: Any) -> None:
    azure = (
        f"  azure: {{transport: {e2e_support.TRANSPORT}}}\n"
        f"prices:\n  azure/gpt-4o-mini-batch: {json.dumps(AZURE_PRICE['azure/gpt-4o-mini-batch'])}\n"
    )
    write_project(
        project,
        _workflow(model, **options),
        agac_yml=project_yml() + azure,
        data={"data/reviews.jsonl": reviews(RECORDS)},
    )


def _chats(emulator: Any) -> list[dict[str, Any]]:
    return [e for e in emulator.requests() if e["op"] == "chat"]


@pytest.mark.parametrize("provider", sorted(FLEX_MODELS))
def test_flex_run_sends_every_call_on_flex_and_ledgers_tier_flex_at_its_price(
    provider: str, emulator: Any, project: Path
) -> None:
    model = f"{provider}/{FLEX_MODELS[provider]}"
    _make(project, model)

    assert api.run("triage", project).summary["state"] == "succeeded"

    field = FIELD.get(provider, "service_tier")
    chats = _chats(emulator)
    assert len(chats) == RECORDS and all(c["body"][field] == "flex" for c in chats)
    doc = api.cost("triage", project)
    (row,) = doc["rows"]
    assert (row["tier"], row["calls"]) == ("flex", RECORDS)
    usage = Usage(row["input_tokens"], row["output_tokens"], row["cached_tokens"])
    prices = PriceTable(AZURE_PRICE)
    billed = "live" if provider == "groq" else "batch"
    assert row["cost_usd"] == pytest.approx(prices.cost(model, usage, billed), abs=1e-6)
    live = prices.cost(model, usage, "live")
    assert doc["flex_saved_usd"] == pytest.approx(live - row["cost_usd"], abs=1e-6)
    assert (doc["flex_saved_usd"] > 0) is (provider != "groq")
    assert doc["batch_saved_usd"] == 0


def test_flex_savings_show_in_agac_cost_beside_batch_and_cache(
    emulator: Any, project: Path
) -> None:
    _make(project, "openai/o4-mini")
    assert api.run("triage", project).summary["state"] == "succeeded"
    saved = api.cost("triage", project)["flex_saved_usd"]
    out = CliRunner().invoke(cli, ["cost", "triage"]).output
    assert f"flex saved ${saved:.6f}" in out and "batch saved" in out and "cache saved" in out
    assert " flex " in out  # the row's tier


@pytest.mark.parametrize("provider", sorted(FLEX_MODELS))
def test_flex_capacity_refusal_in_a_run_spends_no_attempt(
    provider: str, emulator: Any, project: Path
) -> None:
    _make(project, f"{provider}/{FLEX_MODELS[provider]}")
    emulator.add_fault(fault(provider, REFUSALS[provider], times=2))

    result = api.run("triage", project)

    # One attempt each (retry: max_attempts 1), yet every record is answered.
    assert result.summary["state"] == "succeeded"
    assert len(_chats(emulator)) == RECORDS + 2
    waits = [e for e in api.events("triage", project) if e["kind"] == "waiting"]
    assert len(waits) == 2 and all(e["data"]["reason"] == "provider_limit" for e in waits)
    rows = api.cost("triage", project)["rows"]
    assert {r["tier"] for r in rows} == {"flex"}


def _run_in_thread(project: Path, st: Store) -> tuple[threading.Thread, list[Any]]:
    got: list[Any] = []
    worker = threading.Thread(
        target=lambda: got.append(api.run("triage", project, store=st)), daemon=True
    )
    worker.start()
    return worker, got


def _wait_for(condition: Callable[[], bool]) -> None:
    """Wait until ``condition`` holds (a failure guard of 240 s, never a timing)."""
    guard = time.monotonic() + 240
    while not condition():
        assert time.monotonic() < guard, "the condition never held"
        time.sleep(0.02)


@pytest.mark.parametrize("provider", sorted(FLEX_MODELS))
def test_flex_fallback_after_sends_what_flex_has_not_answered_at_the_standard_tier(
    provider: str, emulator: Any, project: Path
) -> None:
    model = f"{provider}/{FLEX_MODELS[provider]}"
    _make(project, model, extra="flex_fallback_after: 30m")
    # The flex tier refuses every call; the standard tier answers.
    refusal = REFUSALS[provider]
    emulator.add_fault({**fault(provider, refusal), "match": {"service_tier": "flex"}})
    clock = ManualClock()
    st = Store(f"sqlite:///{project}/.agac/agac.db", clock=clock)
    try:
        worker, got = _run_in_thread(project, st)
        field = FIELD.get(provider, "service_tier")
        # Every record has been refused on flex at least once (and waits, spending nothing).
        _wait_for(lambda: len([c for c in _chats(emulator) if c["body"].get(field)]) > RECORDS)
        assert not [c for c in _chats(emulator) if not c["body"].get(field)]
        clock.advance(31 * 60)  # past flex_fallback_after
        worker.join(240)
        assert not worker.is_alive()
    finally:
        st.close()

    assert got[0].summary["state"] == "succeeded"
    standard = [c for c in _chats(emulator) if not c["body"].get(field)]
    assert len(standard) == RECORDS  # each record once at the standard tier
    falls = [e for e in api.events("triage", project) if e["kind"] == "flex_fallback"]
    assert len(falls) == RECORDS and all(e["data"]["after"] == 1800.0 for e in falls)
    rows = {r["tier"]: r for r in api.cost("triage", project)["rows"]}
    assert rows["live"]["calls"] == RECORDS and rows["live"]["cost_usd"] > 0
    assert rows["flex"]["cost_usd"] == 0  # the refusals: ledgered, billed nothing


def test_flex_fallback_after_not_reached_keeps_every_call_on_flex(
    emulator: Any, project: Path
) -> None:
    _make(project, "openai/o4-mini", extra="flex_fallback_after: 30m")
    assert api.run("triage", project).summary["state"] == "succeeded"
    assert all(c["body"]["service_tier"] == "flex" for c in _chats(emulator))
    assert not [e for e in api.events("triage", project) if e["kind"] == "flex_fallback"]
    assert {r["tier"] for r in api.cost("triage", project)["rows"]} == {"flex"}


def test_auto_chooses_flex_when_the_deadline_is_too_short_for_batch_and_the_run_keeps_it(
    emulator: Any, project: Path
) -> None:
    _make(
        project,
        "openai/o4-mini",
        mode="auto",
        extra="auto_batch_min_records: 2",
        top="deadline: 2h",
    )

    result = api.run("triage", project)

    assert result.summary["state"] == "succeeded"
    assert result.summary["auto_modes"]["classify"]["mode"] == "flex"
    [chosen] = [e for e in api.events("triage", project) if e["kind"] == "run_mode_chosen"]
    assert (chosen["data"]["mode"], chosen["data"]["why"]) == ("flex", "deadline")
    st = Store(f"sqlite:///{project}/.agac/agac.db")
    try:
        run = st.get_run(result.summary["run_id"])
    finally:
        st.close()
    assert run is not None and run.config["actions"][0]["run_mode"] == "flex"
    assert all(c["body"]["service_tier"] == "flex" for c in _chats(emulator))
    assert {r["tier"] for r in api.cost("triage", project)["rows"]} == {"flex"}
