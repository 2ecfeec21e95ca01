"""``agac run`` end to end through each provider's official SDK against the emulator:
every record answered, outputs valid, usage and cost in the ledger, each request sent
once, and a second run served from stored answers (S5) without a single request.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import e2e_support
import pytest
from e2e_support import MODELS, PROVIDERS, SCHEMA, chat_requests, make_project, run, total_requests
from jsonschema import Draft202012Validator

from agac import api
from agac.providers.base import ProviderSettings
from agac.providers.pricing import BUNDLED_PRICES
from agac.providers.registry import provider_class

RECORDS = 4


@pytest.mark.parametrize("name", PROVIDERS)
def test_workflow_runs_online_through_the_sdk(name: str, emulator: Any, project: Path) -> None:
    make_project(project, f"{name}/{MODELS[name]}", records=RECORDS)

    result = run(project)

    summary = result.summary
    assert result.exit_code == 0, summary
    assert summary["state"] == "succeeded"
    for action in ("classify", "summarize"):
        counts = summary["actions"][action]
        assert (counts["answered"], counts["failed"], counts["skipped"]) == (RECORDS, 0, 0)
        assert (counts["calls"], counts["reused"]) == (RECORDS, 0)
    validator = Draft202012Validator(SCHEMA)
    labels = list(api.export_rows("triage", "classify", project))
    assert len(labels) == RECORDS
    for row in labels:
        assert row["status"] == "answered"
        validator.validate(row["output"])
    for row in api.export_rows("triage", "summarize", project):
        assert row["status"] == "answered"
        assert isinstance(row["output"]["text"], str) and row["output"]["text"]
    stats = emulator.stats()
    assert chat_requests(stats, name) == 2 * RECORDS
    assert stats["answered"] == 2 * RECORDS
    assert stats["duplicate_answers"] == 0


@pytest.mark.parametrize("name", PROVIDERS)
def test_usage_and_cost_are_ledgered(name: str, emulator: Any, project: Path) -> None:
    model = f"{name}/{MODELS[name]}"
    make_project(project, model, records=2)

    summary = run(project).summary

    priced = name != "ollama"
    assert (model in BUNDLED_PRICES) == priced
    ledger = api.cost("triage", project)
    assert {(r["action"], r["provider"], r["model"], r["tier"], r["calls"]) for r in ledger["rows"]} \
        == {("classify", name, MODELS[name], "live", 2), ("summarize", name, MODELS[name], "live", 2)}
    for row in ledger["rows"]:
        assert row["input_tokens"] > 0 and row["output_tokens"] > 0
        assert (row["cost_usd"] > 0) == priced
    assert summary["cost_usd"] == pytest.approx(ledger["cost_usd"])
    assert (summary["cost_usd"] > 0) == priced
    session = api.record_session("r000", project)
    for entry in session["actions"]:
        (attempt,) = entry["attempts"]
        assert attempt["status"] == "ok" and attempt["provider"] == name
        assert attempt["input_tokens"] > 0 and attempt["output_tokens"] > 0
        assert (attempt["cost_usd"] > 0) == priced


@pytest.mark.parametrize("name", PROVIDERS)
def test_S5_second_run_reuses_every_answer(name: str, emulator: Any, project: Path) -> None:
    make_project(project, f"{name}/{MODELS[name]}", records=RECORDS)
    first = run(project).summary
    assert first["state"] == "succeeded"
    emulator.reset_stats()

    second = run(project).summary

    assert second["run_id"] != first["run_id"]
    assert second["state"] == "succeeded"
    assert total_requests(emulator.stats()) == 0
    for action in ("classify", "summarize"):
        counts = second["actions"][action]
        assert (counts["answered"], counts["reused"], counts["calls"]) == (RECORDS, RECORDS, 0)
    assert second["cost_usd"] == 0


def test_deprecated_model_is_one_log_line_not_a_warning(
        emulator: Any, project: Path, caplog: pytest.LogCaptureFixture) -> None:
    """claude-opus-4-5 is deprecated in the anthropic SDK (its table of deprecated
    models), which warns on every call; the adapter says it once in agac's log instead,
    on either transport."""
    make_project(project, "anthropic/claude-opus-4-5", records=3)

    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        summary = run(project).summary

    assert summary["state"] == "succeeded"
    assert [w for w in caught if issubclass(w.category, DeprecationWarning)] == []
    said = [r for r in caplog.records if "claude-opus-4-5" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]


def test_p1_transport_and_connections_follow_the_project(
        emulator: Any, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter gets the transport agac.yml names, and a connection limit that is the
    summed max_concurrency of the actions calling it (two actions of 3 here)."""
    make_project(project, f"openai/{MODELS['openai']}", records=2, concurrency=3)
    cls = provider_class("openai")
    original = cls.__init__
    seen: list[ProviderSettings] = []

    def init(self: Any, settings: ProviderSettings) -> None:
        seen.append(settings)
        original(self, settings)

    monkeypatch.setattr(cls, "__init__", init)

    assert run(project).summary["state"] == "succeeded"

    assert [(s.transport, s.connections) for s in seen] == [(e2e_support.TRANSPORT, 6)]
