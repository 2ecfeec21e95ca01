"""docs/workflow-reference.md filling rules: defaults, llm-only keys, the per-run mode."""

from __future__ import annotations

from pathlib import Path

import pytest

WF = """
input: {path: x}
defaults:
  model: mock/m
  system: "be brief"
  max_tokens: 77
  temperature: 0.3
  timeout: 30s
  rate_limit: {rpm: 60}
  run_mode: online
  poll_interval: 5m
  batch_deadline: 2h
  max_concurrency: 4
  retry: {max_attempts: 5, backoff: {initial: 2s, max: 1m, multiplier: 3, jitter: false}}
  cache: false
actions:
  - name: classify
    prompt: "{{ source.text }}"
  - name: tool
    kind: tool
    function: tools:f
    dependencies: [classify]
  - name: own
    model: mock/other
    max_tokens: 5
    max_concurrency: 2
    retry: {backoff: 3s}
    prompt: hi
"""


@pytest.fixture
def tools(in_tmp_project: Path) -> None:
    (in_tmp_project / "tools.py").write_text("def f(inputs, ctx):\n    return {}\n")


def test_defaults_fill_llm_actions_only(wf, tools: None) -> None:
    checked = wf.check(WF)
    assert checked.problems == [], [p.render() for p in checked.problems]
    workflow = checked.workflow
    assert workflow is not None
    classify, tool, own = (workflow.action(n) for n in ("classify", "tool", "own"))
    assert (classify.model, classify.system, classify.max_tokens) == ("mock/m", "be brief", 77)
    assert (classify.temperature, classify.timeout, classify.rate_limit.rpm) == (0.3, 30.0, 60.0)
    assert classify.retry.max_attempts == 5 and classify.retry.backoff_multiplier == 3.0
    assert classify.retry.jitter is False and classify.cache_mode == "off"
    # llm-only keys never reach the tool; shared keys do
    assert tool.model is None and tool.system is None and tool.run_mode is None
    assert tool.max_tokens is None and tool.timeout is None and tool.rate_limit is None
    assert tool.max_concurrency == 4 and tool.retry.max_attempts == 5 and tool.cache is False
    # per-action wins over defaults (whole key)
    assert (own.model, own.max_tokens, own.max_concurrency) == ("mock/other", 5, 2)
    assert own.retry.max_attempts == 3 and own.retry.backoff_initial == 3.0
    # batch tuning from defaults fills batch actions only
    assert classify.poll_interval is None and classify.batch_deadline is None


def test_defaults_never_raise_llm_codes_on_tools(wf, tools: None) -> None:
    checked = wf.check(WF)
    codes = checked.codes()
    assert "not_an_llm_action" not in codes and "tuning_without_batch" not in codes


def test_per_run_mode_fills_actions_without_their_own(wf) -> None:
    text = """
input: {path: x}
defaults: {model: mock/m, run_mode: batch}
actions:
  - {name: a, prompt: x}
  - {name: b, prompt: x, run_mode: Online}
"""
    checked = wf.check(text, run_mode="online")
    assert checked.problems == []
    assert checked.workflow is not None
    assert [a.run_mode for a in checked.workflow.actions] == ["online", "online"]


def test_per_run_mode_is_merged_before_validation(wf) -> None:
    text = """
input: {path: x}
defaults: {model: ollama/m}
actions:
  - {name: a, prompt: x, poll_interval: 5m}
  - {name: b, prompt: x, run_mode: online}
"""
    # a takes the run's batch mode, so its own tuning is legal; b keeps its own mode
    checked = wf.check(text, run_mode="batch")
    assert checked.problems == [], [p.render() for p in checked.problems]
    assert checked.workflow is not None
    a, b = checked.workflow.actions
    assert (a.run_mode, a.poll_interval, a.batch_deadline) == ("batch", 300.0, 90000.0)
    assert (b.run_mode, b.poll_interval) == ("online", None)
    # without it, a's tuning is written on an online action
    assert wf.check(text).codes() == ["tuning_without_batch"]
    assert wf.check(text, run_mode="sideways").codes() == ["unsupported_run_mode"] * 1


def test_batch_resolution_fills_tuning(wf) -> None:
    text = """
input: {path: x}
defaults: {model: ollama/m, poll_interval: 1m, run_mode: BATCH}
actions:
  - {name: a, prompt: x}
  - {name: b, prompt: x, batch_deadline: 3h}
  - {name: c, prompt: x, run_mode: online}
"""
    checked = wf.check(text)
    assert checked.problems == []
    assert checked.workflow is not None
    a, b, c = checked.workflow.actions
    assert (a.run_mode, a.poll_interval, a.batch_deadline) == ("batch", 60.0, 90000.0)
    assert (b.poll_interval, b.batch_deadline) == (60.0, 10800.0)
    assert (c.run_mode, c.poll_interval, c.batch_deadline) == ("online", None, None)


# Batch actions on a provider that can run them: the mock has no batch API
# (batch_unsupported), Ollama runs them locally and needs no key.
TUNED = """
input: {path: x}
defaults: {model: ollama/m, poll_interval: 1m}
actions:
  - {name: a, prompt: x}
  - {name: b, prompt: x, batch_deadline: 3h}
  - {name: c, prompt: x, run_mode: online}
"""


def test_per_run_tuning_fills_batched_actions_only(wf) -> None:
    checked = wf.check(TUNED, run_mode="batch", poll_interval="10s", batch_deadline=7200.0)
    assert checked.problems == [], [p.render() for p in checked.problems]
    assert checked.workflow is not None
    a, b, c = checked.workflow.actions
    # the run's tuning wins over defaults, the action's own value wins over the run's
    assert (a.run_mode, a.poll_interval, a.batch_deadline) == ("batch", 10.0, 7200.0)
    assert (b.poll_interval, b.batch_deadline) == (10.0, 10800.0)
    assert (c.run_mode, c.poll_interval, c.batch_deadline) == ("online", None, None)


def test_per_run_tuning_is_recorded_in_the_snapshot(wf) -> None:
    plain = wf.check(TUNED, run_mode="batch").workflow
    tuned = wf.check(TUNED, run_mode="batch", poll_interval=30).workflow
    assert plain is not None and tuned is not None
    assert tuned.snapshot()["actions"][0]["poll_interval"] == 30.0
    assert plain.snapshot()["actions"][0]["poll_interval"] == 60.0
    assert tuned.config_hash != plain.config_hash


def test_per_run_tuning_without_batch_is_a_warning(wf) -> None:
    text = "input: {path: x}\ndefaults: {model: mock/m}\nactions:\n  - {name: a, prompt: x}\n"
    checked = wf.check(text, poll_interval="5m")
    p = checked.one("tuning_without_batch")
    assert p.severity == "warning" and p.line == 0 and "--poll-interval" in p.message
    assert checked.workflow is not None
    assert all(a.poll_interval is None for a in checked.workflow.actions)


@pytest.mark.parametrize("value", ["0s", "soon", -5, 0.0, float("nan"), True])
def test_per_run_tuning_must_be_a_positive_duration(wf, value: object) -> None:
    checked = wf.check(TUNED, run_mode="batch", poll_interval=value, batch_deadline=value)
    poll, deadline = checked.one("invalid_poll_interval"), checked.one("invalid_batch_deadline")
    assert poll.line == 0 and "--poll-interval" in poll.message
    assert deadline.line == 0 and "--batch-deadline" in deadline.message
    assert checked.workflow is None


def test_defaults_reject_per_action_only_keys(wf) -> None:
    checked = wf.check("""
input: {path: x}
defaults: {name: x, kind: tool, dependencies: [a], function: "m:f", fan_out: {versions: 2}}
actions:
  - {name: a, model: mock/m, prompt: x}
""")
    assert checked.codes() == ["unknown_key"] * 5


def test_azure_batch_deadline_is_always_set_25_hours_unless_the_action_says(
    wf, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Azure never expires a batch, so agac's ``batch_deadline`` is what ends one: an Azure
    batch action always has one, 25 hours (past Azure's 24-hour window) unless set."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k")
    text = """
input: {path: x}
defaults: {model: azure/gpt-4o-mini-batch, run_mode: batch}
actions:
  - {name: a, prompt: x}
  - {name: b, prompt: x, batch_deadline: 30h}
"""
    checked = wf.check(text)
    assert checked.problems == [], [p.render() for p in checked.problems]
    assert checked.workflow is not None
    a, b = checked.workflow.actions
    assert (a.run_mode, a.batch_deadline) == ("batch", 25 * 3600.0)
    assert b.batch_deadline == 30 * 3600.0
