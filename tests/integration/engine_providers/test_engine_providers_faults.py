"""The engine under injected provider faults, end to end through the official SDKs.

Each test is named after the rule it proves (docs/providers.md error taxonomy, §7.2 reasons):
schema-violating and truncated answers spend attempts and are re-asked with the error
fed back; a refusal is final; a 429 that says when to come back is waited out without
spending an attempt; a quota refusal is fatal after one request; 5xx and dropped
connections are retried with backoff; missing credentials stop a run before any
request; a workflow ``rate_limit`` keeps the provider from ever answering 429.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    MODELS,
    SCHEMA,
    chat_requests,
    fault,
    make_project,
    run,
    sent_requests,
    total_requests,
)
from jsonschema import Draft202012Validator

from agac import api
from agac.errors import ConfigError

OPENAI = f"openai/{MODELS['openai']}"


def _session_attempts(project: Path, key: str, action: str) -> list[dict[str, Any]]:
    session = api.record_session(key, project)
    (entry,) = [a for a in session["actions"] if a["action"] == action]
    return entry["attempts"]


# -- answers the model got wrong ------------------------------------------------------------


@pytest.mark.parametrize("name", tuple(MODELS))
def test_schema_violation_is_reasked_with_the_error_fed_back(
    name: str, emulator: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(project, f"{name}/{MODELS[name]}", records=1, summarize=False)
    emulator.add_fault(fault(name, {"answer": "schema_violation"}, times=1))
    sent = sent_requests(monkeypatch, name)

    summary = run(project).summary

    assert summary["state"] == "succeeded"
    counts = summary["actions"]["classify"]
    assert (counts["answered"], counts["calls"]) == (1, 2)
    first, second = sent
    assert second.messages[: len(first.messages)] == first.messages
    bad_answer, feedback = second.messages[len(first.messages) :]
    assert bad_answer.role == "assistant" and "schema_violation" in bad_answer.content
    assert feedback.role == "user" and "did not match the JSON schema" in feedback.content
    attempts = _session_attempts(project, "r000", "classify")
    assert [(a["attempt"], a["status"]) for a in attempts] == [(1, "error"), (2, "ok")]
    assert attempts[0]["error"].startswith("schema_invalid")
    # The re-ask carries the bad answer and the feedback: more input than the first ask.
    assert attempts[1]["input_tokens"] > attempts[0]["input_tokens"]
    (row,) = api.export_rows("triage", "classify", project)
    Draft202012Validator(SCHEMA).validate(row["output"])
    assert chat_requests(emulator.stats(), name) == 2


def test_schema_violation_reask_backs_off(emulator: Any, project: Path) -> None:
    make_project(
        project,
        OPENAI,
        records=1,
        summarize=False,
        retry="{max_attempts: 2, backoff: {initial: 300ms, max: 300ms}}",
    )
    emulator.add_fault(fault("openai", {"answer": "schema_violation"}, times=1))

    run(project)

    first, second = _session_attempts(project, "r000", "classify")
    # Full jitter waits between half the delay and the delay: at least 150 ms here.
    assert second["created_at"] - first["created_at"] >= 0.15


def test_schema_violation_every_time_fails_schema_invalid_after_max_attempts(
    emulator: Any, project: Path
) -> None:
    make_project(project, OPENAI, records=2)
    emulator.add_fault(fault("openai", {"answer": "schema_violation"}))

    result = run(project)

    summary = result.summary
    assert summary["state"] == "failed" and result.exit_code == 1
    classify, summarize = summary["actions"]["classify"], summary["actions"]["summarize"]
    assert (classify["failed"], classify["calls"]) == (2, 6)
    assert classify["reasons"] == {"schema_invalid": 2}
    assert summarize["reasons"] == {"upstream_failed": 2} and summarize["calls"] == 0
    attempts = _session_attempts(project, "r001", "classify")
    assert [a["attempt"] for a in attempts] == [1, 2, 3]
    assert all(a["status"] == "error" for a in attempts)
    assert chat_requests(emulator.stats(), "openai") == 6


def test_truncated_answer_fails_truncated_after_max_attempts(emulator: Any, project: Path) -> None:
    make_project(project, OPENAI, records=1, summarize=False)
    emulator.add_fault(fault("openai", {"answer": "truncated"}))

    summary = run(project).summary

    counts = summary["actions"]["classify"]
    assert counts["reasons"] == {"truncated": 1} and counts["calls"] == 3
    (row,) = api.export_rows("triage", "classify", project)
    assert (row["status"], row["reason"]) == ("failed", "truncated")
    attempts = _session_attempts(project, "r000", "classify")
    assert [(a["attempt"], a["error"].split(":")[0]) for a in attempts] == [
        (1, "truncated"),
        (2, "truncated"),
        (3, "truncated"),
    ]
    # Truncated answers are paid for: every attempt is in the ledger with its tokens.
    assert all(a["output_tokens"] > 0 and a["cost_usd"] > 0 for a in attempts)
    assert chat_requests(emulator.stats(), "openai") == 3


#: How each provider signals that the model declined, as the engine reports it. Gemini
#: blocks with finishReason SAFETY (a content filter); Ollama has no refusal signal at all
#: (the model just says no in text), so it is not in this list.
REFUSAL_REASON = {
    "openai": "refusal",
    "anthropic": "refusal",
    "groq": "refusal",
    "gemini": "content_filter",
}


@pytest.mark.parametrize("name", tuple(REFUSAL_REASON))
def test_refusal_fails_at_once_without_retry(name: str, emulator: Any, project: Path) -> None:
    make_project(project, f"{name}/{MODELS[name]}", records=1)
    emulator.add_fault(fault(name, {"answer": "refusal"}))

    summary = run(project).summary

    reason = REFUSAL_REASON[name]
    assert summary["actions"]["classify"]["reasons"] == {reason: 1}
    assert summary["actions"]["classify"]["calls"] == 1
    assert summary["actions"]["summarize"]["reasons"] == {"upstream_failed": 1}
    assert chat_requests(emulator.stats(), name) == 1
    (row,) = api.export_rows("triage", "classify", project)
    assert (row["status"], row["reason"]) == ("failed", reason)


def test_invalid_json_is_reasked_with_the_parse_error_fed_back(
    emulator: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(project, OPENAI, records=1, summarize=False)
    emulator.add_fault(fault("openai", {"answer": "invalid_json"}, times=1))
    sent = sent_requests(monkeypatch, "openai")

    summary = run(project).summary

    assert summary["state"] == "succeeded"
    assert summary["actions"]["classify"]["calls"] == 2
    feedback = sent[1].messages[-1]
    assert feedback.role == "user" and "not valid JSON" in feedback.content


# -- provider errors ----------------------------------------------------------------------

#: Providers that say when to come back after a 429, and a hint each can express
#: (Gemini's RetryInfo counts whole seconds).
WAIT_HINTS = {"openai": 0.3, "anthropic": 0.3, "gemini": 1, "groq": 0.3}


@pytest.mark.parametrize("name", tuple(WAIT_HINTS))
def test_429_with_retry_after_waits_without_spending_an_attempt(
    name: str, emulator: Any, project: Path
) -> None:
    make_project(
        project, f"{name}/{MODELS[name]}", records=1, summarize=False, retry="{max_attempts: 1}"
    )
    hint = WAIT_HINTS[name]
    emulator.add_fault(fault(name, {"http": 429, "retry_after": hint}, times=1))

    summary = run(project).summary

    assert summary["state"] == "succeeded"
    assert summary["actions"]["classify"]["answered"] == 1
    waits = [e for e in api.events(None, project) if e["kind"] == "waiting"]
    assert [(w["data"]["reason"], w["data"]["seconds"]) for w in waits] == [
        ("provider_limit", pytest.approx(hint, abs=0.05))
    ]
    attempts = _session_attempts(project, "r000", "classify")
    assert [(a["status"], a["attempt"]) for a in attempts] == [("error", 1), ("ok", 1)]
    assert attempts[1]["created_at"] - attempts[0]["created_at"] >= hint * 0.9
    assert chat_requests(emulator.stats(), name) == 2


#: A quota or spend-cap refusal in each provider's own form.
QUOTA = {
    "openai": {"http": 429, "code": "insufficient_quota"},
    "groq": {"http": 429, "code": "insufficient_quota"},
    "anthropic": {"http": 429, "code": "enforced_spend_limit_reached"},
    "gemini": {"http": 429, "code": "RESOURCE_EXHAUSTED"},
}


@pytest.mark.parametrize("name", tuple(QUOTA))
def test_quota_429_is_fatal_provider_error_after_one_request(
    name: str, emulator: Any, project: Path
) -> None:
    make_project(project, f"{name}/{MODELS[name]}", records=1)
    emulator.add_fault(fault(name, QUOTA[name]))

    summary = run(project).summary

    assert summary["state"] == "failed"
    assert summary["actions"]["classify"]["reasons"] == {"provider_error": 1}
    assert summary["actions"]["classify"]["calls"] == 1
    assert summary["actions"]["summarize"]["reasons"] == {"upstream_failed": 1}
    assert chat_requests(emulator.stats(), name) == 1
    (row,) = api.export_rows("triage", "classify", project)
    assert "quota" in row["detail"] or "spend" in row["detail"]


@pytest.mark.parametrize("name", tuple(MODELS))
def test_5xx_is_retried_with_backoff_and_succeeds(name: str, emulator: Any, project: Path) -> None:
    make_project(project, f"{name}/{MODELS[name]}", records=1, summarize=False)
    emulator.add_fault(fault(name, {"http": 503}, times=2))

    summary = run(project).summary

    assert summary["state"] == "succeeded"
    assert summary["actions"]["classify"]["calls"] == 3
    attempts = _session_attempts(project, "r000", "classify")
    assert [(a["attempt"], a["status"]) for a in attempts] == [
        (1, "error"),
        (2, "error"),
        (3, "ok"),
    ]
    # Backoff with full jitter: at least half the initial 10 ms between attempts.
    gaps = [b["created_at"] - a["created_at"] for a, b in pairwise(attempts)]
    assert all(gap >= 0.005 for gap in gaps), gaps
    assert chat_requests(emulator.stats(), name) == 3


@pytest.mark.parametrize("name", tuple(MODELS))
def test_dropped_connection_is_retryable(name: str, emulator: Any, project: Path) -> None:
    make_project(project, f"{name}/{MODELS[name]}", records=1, summarize=False)
    emulator.add_fault(fault(name, {"drop_connection": True}, times=1))

    summary = run(project).summary

    assert summary["state"] == "succeeded"
    attempts = _session_attempts(project, "r000", "classify")
    assert [(a["attempt"], a["status"]) for a in attempts] == [(1, "error"), (2, "ok")]
    assert chat_requests(emulator.stats(), name) == 2
    assert emulator.stats()["duplicate_answers"] == 0


def test_5xx_every_time_fails_provider_error_after_max_attempts(
    emulator: Any, project: Path
) -> None:
    make_project(project, OPENAI, records=1, summarize=False)
    emulator.add_fault(fault("openai", {"http": 500}))

    summary = run(project).summary

    assert summary["actions"]["classify"]["reasons"] == {"provider_error": 1}
    assert chat_requests(emulator.stats(), "openai") == 3


# -- before anything is sent ------------------------------------------------------------------

CREDENTIALS = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "groq": ("GROQ_API_KEY",),
}


@pytest.mark.parametrize("name", tuple(CREDENTIALS))
def test_missing_credentials_stops_the_run_before_any_request(
    name: str, emulator: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(project, f"{name}/{MODELS[name]}", records=2)
    for variable in CREDENTIALS[name]:
        monkeypatch.delenv(variable)

    with pytest.raises(ConfigError) as caught:
        run(project)

    codes = {p.code for p in caught.value.problems}
    assert codes == {"missing_credentials"}, caught.value
    assert CREDENTIALS[name][0] in str(caught.value)
    assert total_requests(emulator.stats()) == 0


# -- rate limits ------------------------------------------------------------------------------

#: A compressed minute: the engine's rate window and the emulator's, in seconds. The
#: engine counts a call when it takes its slot, the emulator when the request arrives;
#: in between, a cold SDK can spend over half a second on its first call (imports,
#: client setup). At 60 s that skew vanishes; in a compressed minute the emulator's
#: window is kept shorter to absorb it.
CLIENT_MINUTE = 1.5
SERVER_MINUTE = 0.75
RPM = 3


@pytest.fixture
def short_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    from agac.emulator import faults
    from agac.engine.limits.rates import RateLimiter

    monkeypatch.setattr(RateLimiter, "WINDOW", CLIENT_MINUTE)
    monkeypatch.setattr(faults, "RATE_WINDOW_SECONDS", SERVER_MINUTE)


def _rate_limited(emulator: Any) -> int:
    """429s the emulator's rate_limit rule answered (it counts only the ones it fired)."""
    (rule,) = emulator.state.faults.rules
    return int(rule.fired)


def test_rate_limit_keeps_the_provider_from_answering_429(
    emulator: Any, project: Path, short_minute: None
) -> None:
    make_project(
        project, OPENAI, records=2 * RPM + 1, summarize=False, extra=f"rate_limit: {{rpm: {RPM}}}"
    )
    emulator.add_fault(fault("openai", {"rate_limit": {"rpm": RPM}}))

    summary = run(project).summary

    assert summary["state"] == "succeeded"
    assert summary["actions"]["classify"]["calls"] == 2 * RPM + 1
    assert _rate_limited(emulator) == 0
    assert chat_requests(emulator.stats(), "openai") == 2 * RPM + 1


def test_rate_limit_without_a_workflow_limit_meets_429s(
    emulator: Any, project: Path, short_minute: None
) -> None:
    """The control: the same load with no ``rate_limit`` in the workflow does hit the
    provider's limit (and the engine waits the 429s out)."""
    make_project(project, OPENAI, records=2 * RPM + 1, summarize=False)
    emulator.add_fault(fault("openai", {"rate_limit": {"rpm": RPM}}))

    summary = run(project).summary

    assert summary["state"] == "succeeded"
    assert _rate_limited(emulator) > 0


def test_rate_limit_in_defaults_holds_across_actions_on_one_model(
    emulator: Any, project: Path, short_minute: None
) -> None:
    """A provider limits requests per model, whatever action sends them: two actions on
    one model under ``defaults: rate_limit: {rpm: N}`` must still stay within N."""
    make_project(project, OPENAI, records=RPM + 1, extra=f"rate_limit: {{rpm: {RPM}}}")
    emulator.add_fault(fault("openai", {"rate_limit": {"rpm": RPM}}))

    summary = run(project).summary

    assert summary["state"] == "succeeded"
    assert _rate_limited(emulator) == 0
