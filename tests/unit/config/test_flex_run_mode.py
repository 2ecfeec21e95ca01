"""``run_mode: flex`` and ``flex_fallback_after`` in workflow files (docs/providers.md,
Tiers): a flex action on a provider or model without a flex tier is ``flex_unsupported``,
naming the model, at the line that chose flex — never a silent standard-price call."""

from __future__ import annotations

import pytest


def test_flex_run_mode_is_accepted_on_a_model_its_provider_serves_on_flex(wf) -> None:
    text = """
input: {path: x}
actions:
  - {name: a, model: openai/o4-mini, prompt: x, run_mode: Flex, flex_fallback_after: 30m}
  - {name: b, model: gemini/gemini-2.5-flash, prompt: x, run_mode: flex}
  - {name: c, model: groq/llama-3.3-70b-versatile, prompt: x, run_mode: flex}
"""
    checked = wf.check(text, check_credentials=False)
    assert checked.problems == [], [p.render() for p in checked.problems]
    assert checked.workflow is not None
    a, b, c = checked.workflow.actions
    assert (a.run_mode, a.flex_fallback_after, a.poll_interval, a.batch_deadline) == (
        "flex",
        1800.0,
        None,
        None,
    )
    assert (b.run_mode, b.flex_fallback_after, c.run_mode) == ("flex", None, "flex")


def test_flex_unsupported_names_the_model_and_the_line_that_chose_flex(wf) -> None:
    text = """
input: {path: x}
actions:
  - name: a
    model: openai/gpt-4o-mini
    prompt: x
    run_mode: flex
"""
    checked = wf.check(text, check_credentials=False)
    problem = checked.one("flex_unsupported")
    assert "openai/gpt-4o-mini" in problem.message and "'gpt-4o-mini'" in problem.message
    assert problem.file.endswith("wf.yml") and problem.line == checked.line_of("run_mode: flex")
    assert checked.workflow is None


def test_flex_unsupported_on_a_provider_without_a_flex_tier(wf) -> None:
    text = """
input: {path: x}
defaults: {run_mode: flex}
actions:
  - {name: a, model: anthropic/claude-haiku-4-5, prompt: x}
"""
    checked = wf.check(text, check_credentials=False)
    problem = checked.one("flex_unsupported")
    assert "anthropic/claude-haiku-4-5" in problem.message and "no flex tier" in problem.message
    assert problem.line == checked.line_of("run_mode: flex")
    assert "openai" in (problem.hint or "") and "gemini" in (problem.hint or "")


def test_flex_unsupported_from_the_run_mode_of_the_run(wf) -> None:
    text = "input: {path: x}\nactions:\n  - {name: a, model: mock/m, prompt: x}\n"
    checked = wf.check(text, run_mode="flex", check_credentials=False)
    problem = checked.one("flex_unsupported")
    assert "--run-mode flex" in problem.message and "mock/m" in problem.message


def test_flex_fallback_after_on_an_action_not_flex_is_an_error(wf) -> None:
    text = """
input: {path: x}
defaults: {flex_fallback_after: 10m}
actions:
  - {name: a, model: openai/o4-mini, prompt: x, run_mode: online, flex_fallback_after: 5m}
  - {name: b, model: openai/o4-mini, prompt: x}
  - {name: c, model: openai/o4-mini, prompt: x, run_mode: auto}
"""
    checked = wf.check(text, check_credentials=False)
    assert checked.codes() == ["flex_fallback_without_flex"]
    assert checked.one("flex_fallback_without_flex").line == checked.line_of("name: a")
    text = text.replace(", run_mode: online, flex_fallback_after: 5m", "")
    checked = wf.check(text, check_credentials=False)
    assert checked.workflow is not None
    a, b, c = checked.workflow.actions
    # From defaults it fills only what may run on flex: auto (an online action is left be).
    assert (a.flex_fallback_after, b.flex_fallback_after, c.flex_fallback_after) == (
        None,
        None,
        600.0,
    )


@pytest.mark.parametrize("value", ["0s", "soon", -3])
def test_flex_fallback_after_must_be_a_positive_duration(wf, value: object) -> None:
    text = f"""
input: {{path: x}}
actions:
  - {{name: a, model: openai/o4-mini, prompt: x, run_mode: flex, flex_fallback_after: {value!r}}}
"""
    checked = wf.check(text, check_credentials=False)
    assert checked.codes() == ["invalid_flex_fallback"]


def test_flex_batch_tuning_on_a_flex_action_is_tuning_without_batch(wf) -> None:
    text = """
input: {path: x}
actions:
  - {name: a, model: openai/o4-mini, prompt: x, run_mode: flex, poll_interval: 1m}
"""
    checked = wf.check(text, check_credentials=False)
    assert checked.codes() == ["tuning_without_batch"]
    assert "run_mode is flex" in checked.one("tuning_without_batch").message
