"""``run_mode: auto`` and ``auto_batch_min_records`` in workflow files (decision 0085), and
the rule that chooses the mode at admission."""

from __future__ import annotations

import pytest

from agac.config.model import Action, Workflow
from agac.engine.lifecycle.modes import auto_units, choose_mode, keep_choices, resolve_auto


def test_i24_run_mode_auto_fills_batch_tuning_and_the_threshold(wf) -> None:
    text = """
input: {path: x}
defaults: {model: openai/gpt-4o-mini, run_mode: auto, poll_interval: 1m}
actions:
  - {name: a, prompt: x}
  - {name: b, prompt: x, auto_batch_min_records: 20, batch_deadline: 30h}
  - {name: c, prompt: x, run_mode: online}
"""
    checked = wf.check(text, check_credentials=False)
    assert checked.problems == [], [p.render() for p in checked.problems]
    assert checked.workflow is not None
    a, b, c = checked.workflow.actions
    assert (a.run_mode, a.poll_interval, a.batch_deadline, a.auto_batch_min_records) == (
        "auto",
        60.0,
        90000.0,
        500,
    )
    assert (b.auto_batch_min_records, b.batch_deadline) == (20, 30 * 3600.0)
    assert (c.run_mode, c.poll_interval, c.auto_batch_min_records) == ("online", None, None)


def test_i24_run_mode_auto_from_the_run_and_any_case(wf) -> None:
    text = "input: {path: x}\ndefaults: {model: openai/gpt-4o-mini}\nactions:\n  - {name: a, prompt: x}\n"
    checked = wf.check(text, run_mode="Auto", check_credentials=False)
    assert checked.workflow is not None and checked.workflow.actions[0].run_mode == "auto"


@pytest.mark.parametrize("value", [0, -3, "many", 2.5, True])
def test_i24_run_mode_auto_threshold_must_be_a_positive_integer(wf, value: object) -> None:
    text = f"""
input: {{path: x}}
actions:
  - name: a
    model: openai/gpt-4o-mini
    prompt: x
    run_mode: auto
    auto_batch_min_records: {value!r}
"""
    checked = wf.check(text, check_credentials=False)
    problem = checked.one("invalid_value")
    assert problem.line == checked.line_of("auto_batch_min_records")
    assert checked.workflow is None


def test_i24_run_mode_auto_threshold_on_an_action_not_auto_is_an_error(wf) -> None:
    text = """
input: {path: x}
defaults: {auto_batch_min_records: 5}
actions:
  - {name: a, model: openai/gpt-4o-mini, prompt: x, run_mode: batch, auto_batch_min_records: 9}
  - {name: b, model: openai/gpt-4o-mini, prompt: x}
"""
    checked = wf.check(text, check_credentials=False)
    assert checked.codes() == ["auto_threshold_without_auto"]
    assert checked.one("auto_threshold_without_auto").line == checked.line_of("name: a")


def _auto(**fields: object) -> Action:
    values: dict[str, object] = {
        "name": "a",
        "model": "openai/gpt-4o-mini",
        "provider": "openai",
        "model_name": "gpt-4o-mini",
        "run_mode": "auto",
        "auto_batch_min_records": 500,
        "poll_interval": 300.0,
        "batch_deadline": 25 * 3600.0,
    }
    values.update(fields)
    return Action(**values)  # type: ignore[arg-type]


def test_i24_run_mode_auto_rule() -> None:
    assert choose_mode(_auto(), 499, remaining=None).mode == "online"
    assert choose_mode(_auto(), 500, remaining=None).mode == "batch"
    # a deadline 25 h away is enough for a 25 h batch_deadline; a second less is not
    assert choose_mode(_auto(), 500, remaining=25 * 3600.0).mode == "batch"
    assert choose_mode(_auto(), 500, remaining=25 * 3600.0 - 1).why == "deadline"
    assert choose_mode(_auto(batch_deadline=3600.0), 500, remaining=7200.0).mode == "batch"
    local = _auto(model="ollama/llama3", provider="ollama", model_name="llama3")
    assert choose_mode(local, 500, remaining=None).why == "no_batch_api"
    assert choose_mode(_auto(), 500, remaining=None, durable=False).why == "not_durable"
    assert choose_mode(_auto(), 500, remaining=None, sequential=True).why == "sequential_fan_out"


def test_i24_run_mode_auto_resolution_keeps_the_config_hash(wf) -> None:
    text = """
input: {path: x}
defaults: {model: openai/gpt-4o-mini, run_mode: auto, auto_batch_min_records: 10}
actions:
  - {name: a, prompt: x}
  - name: b
    dependencies: [a]
    prompt: x
    fan_out: {versions: 4}
  - {name: c, prompt: x, run_mode: online}
"""
    checked = wf.check(text, check_credentials=False)
    assert checked.workflow is not None, [p.render() for p in checked.problems]
    workflow = checked.workflow
    assert auto_units(workflow, 3) == {"a": 3, "b": 12, "c": 3}
    resolved, choices = resolve_auto(workflow, 3, remaining=None)
    assert resolved.config_hash == workflow.config_hash
    assert [(c.action, c.mode) for c in choices] == [("a", "online"), ("b", "batch")]
    a, b, c = resolved.actions
    assert (a.run_mode, a.poll_interval, a.auto_choice) == (
        "online",
        None,
        "below_threshold: 3 units, fewer than auto_batch_min_records 10",
    )
    assert (b.run_mode, b.poll_interval) == ("batch", 300.0)
    assert c.auto_choice is None
    # the choice survives the run's config snapshot
    again = Workflow.from_snapshot(resolved.snapshot())
    assert again.actions == resolved.actions and again.config_hash == workflow.config_hash


def test_i24_run_mode_auto_a_retry_keeps_the_original_choice(wf) -> None:
    text = """
input: {path: x}
defaults: {model: openai/gpt-4o-mini, run_mode: auto}
actions:
  - {name: a, prompt: x}
  - {name: b, prompt: x}
"""
    checked = wf.check(text, check_credentials=False)
    assert checked.workflow is not None
    original = [
        Action(name="a", run_mode="batch", auto_choice="at_threshold: 900 units"),
        Action(name="b", run_mode="online"),
    ]
    kept = keep_choices(checked.workflow, original)
    a, b = kept.actions
    assert (a.run_mode, a.poll_interval) == ("batch", 300.0)
    assert a.auto_choice == "as_original: as the run it retries chose (at_threshold: 900 units)"
    assert b.run_mode == "auto"  # not chosen by auto before: chosen anew at admission
    assert kept.config_hash == checked.workflow.config_hash
