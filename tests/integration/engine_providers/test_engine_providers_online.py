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
from agac.providers.pricing import PriceTable
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

    priced = name != "ollama"  # local models cost 0; the others are in the price library
    assert PriceTable().get(model) is not None
    assert (PriceTable().get(model).source == "genai-prices") == priced  # type: ignore[union-attr]
    ledger = api.cost("triage", project)
    assert {
        (r["action"], r["provider"], r["model"], r["tier"], r["calls"]) for r in ledger["rows"]
    } == {("classify", name, MODELS[name], "live", 2), ("summarize", name, MODELS[name], "live", 2)}
    for row in ledger["rows"]:
        assert row["input_tokens"] > 0 and row["output_tokens"] > 0
        assert (row["cost_usd"] > 0) == priced
        assert row["price"] is None  # neither unpriced nor a derived batch price
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


def _lifecycle_lines(caplog: pytest.LogCaptureFixture, model: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if model in r.getMessage() and r.levelno >= logging.WARNING
    ]


def test_deprecated_model_is_one_log_line_not_a_warning(
    emulator: Any, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Feature on: the provider's Models API (here the emulator, given a table) says the
    model is deprecated; the adapter says it once in agac's log, never as a Python
    warning on every call, and asks the Models API once per model."""
    emulator.set_models(
        {"claude-sonnet-4-5": {"lifecycle": "deprecated", "retires_at": "2026-10-01T00:00:00Z"}}
    )
    make_project(project, "anthropic/claude-sonnet-4-5", records=3)

    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        summary = run(project).summary

    assert summary["state"] == "succeeded"
    assert [w for w in caught if issubclass(w.category, DeprecationWarning)] == []
    said = _lifecycle_lines(caplog, "claude-sonnet-4-5")
    assert said == [
        (
            "anthropic model claude-sonnet-4-5 is deprecated (retires 2026-10-01): "
            "move to a newer model"
        )
    ]
    assert emulator.stats()["requests"]["anthropic"]["model.get"] == 1


@pytest.mark.parametrize("answer", ["active", "http_404", "http_500"])
def test_deprecation_notice_off_when_the_models_api_does_not_say(
    answer: str, emulator: Any, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Feature off: an active model, or a Models API that refuses or fails, gives no line,
    no warning and no failed unit (not knowing a lifecycle never fails a call)."""
    if answer != "active":
        emulator.add_fault(
            {
                "provider": "anthropic",
                "op": "model.get",
                "fault": {"http": int(answer.removeprefix("http_"))},
            }
        )
    make_project(project, "anthropic/claude-sonnet-4-5", records=3)

    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        summary = run(project).summary

    assert summary["state"] == "succeeded", summary
    assert [w for w in caught if issubclass(w.category, DeprecationWarning)] == []
    assert _lifecycle_lines(caplog, "claude-sonnet-4-5") == []
    assert emulator.stats()["requests"]["anthropic"]["model.get"] == 1


def test_p1_transport_and_connections_follow_the_project(
    emulator: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
