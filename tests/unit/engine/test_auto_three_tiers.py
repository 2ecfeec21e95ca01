"""``run_mode: auto`` over three tiers (decision 0103): batch when it fits the deadline and
the count, flex when batch cannot serve the action and its provider serves the model on
flex at the batch price, online otherwise; the choice survives the run's config snapshot
and a retry keeps it."""

from __future__ import annotations

from pathlib import Path

from agac.config.model import Action, InputSpec, Workflow
from agac.engine.lifecycle.modes import choose_mode, keep_choices, resolve_auto

HOUR = 3600.0


def _workflow(*actions: Action, deadline: float | None = None) -> Workflow:
    return Workflow(
        name="w",
        path=Path("w.yml"),
        source_hash="",
        input=InputSpec("x.jsonl"),
        actions=actions,
        deadline=deadline,
    )


def _auto(model: str = "openai/o4-mini", **fields: object) -> Action:
    provider, _, name = model.partition("/")
    values: dict[str, object] = {
        "name": "a",
        "model": model,
        "provider": provider,
        "model_name": name,
        "run_mode": "auto",
        "auto_batch_min_records": 500,
        "poll_interval": 300.0,
        "batch_deadline": 25 * HOUR,
        "flex_fallback_after": 1800.0,
    }
    values.update(fields)
    return Action(**values)  # type: ignore[arg-type]


def test_auto_chooses_batch_when_it_fits_the_deadline_and_the_count() -> None:
    choice = choose_mode(_auto(), 500, remaining=30 * HOUR)
    assert (choice.mode, choice.why) == ("batch", "at_threshold")


def test_auto_chooses_flex_when_the_deadline_is_too_short_for_batch() -> None:
    choice = choose_mode(_auto(), 500, remaining=2 * HOUR)
    assert (choice.mode, choice.why) == ("flex", "deadline")
    assert choice.detail == (
        "the run's deadline is 2.0 h away, less than batch_deadline 25.0 h; "
        "openai serves o4-mini on flex at the batch price"
    )
    gemini = choose_mode(_auto("gemini/gemini-2.5-flash"), 900, remaining=HOUR)
    assert gemini.mode == "flex"


def test_auto_chooses_flex_whenever_batch_cannot_serve_a_big_enough_action() -> None:
    assert choose_mode(_auto(), 500, remaining=None, durable=False).mode == "flex"
    assert choose_mode(_auto(), 500, remaining=None, sequential=True).mode == "flex"


def test_auto_chooses_online_when_flex_is_not_sold_served_or_cheaper() -> None:
    cases = {
        "openai/gpt-4o-mini": "openai does not serve gpt-4o-mini on flex",
        "anthropic/claude-haiku-4-5": "anthropic has no flex tier",
        "groq/llama-3.3-70b-versatile": "groq's flex tier costs the online price",
    }
    for model, why_not in cases.items():
        choice = choose_mode(_auto(model), 500, remaining=2 * HOUR)
        assert (choice.mode, choice.why) == ("online", "deadline"), model
        assert choice.detail.endswith(why_not), choice.detail


def test_auto_below_the_threshold_stays_online_even_where_flex_is_sold() -> None:
    choice = choose_mode(_auto(), 499, remaining=2 * HOUR)
    assert (choice.mode, choice.why) == ("online", "below_threshold")


def test_auto_flex_choice_keeps_its_fallback_and_drops_batch_tuning() -> None:
    workflow = _workflow(_auto(auto_batch_min_records=2), deadline=HOUR)
    resolved, [choice] = resolve_auto(workflow, 3, remaining=HOUR)
    assert (choice.mode, choice.why, choice.units) == ("flex", "deadline", 3)
    (a,) = resolved.actions
    assert (a.run_mode, a.poll_interval, a.batch_deadline) == ("flex", None, None)
    assert a.flex_fallback_after == 1800.0 and a.auto_choice is not None
    assert a.auto_choice.startswith("deadline: ")
    again = Workflow.from_snapshot(resolved.snapshot())
    assert again.actions == resolved.actions
    batched, _ = resolve_auto(workflow, 3, remaining=None)
    assert (batched.actions[0].run_mode, batched.actions[0].flex_fallback_after) == ("batch", None)


def test_auto_a_retry_keeps_an_original_flex_choice() -> None:
    workflow = _workflow(_auto())
    original = [Action(name="a", run_mode="flex", auto_choice="deadline: …")]
    (a,) = keep_choices(workflow, original).actions
    assert (a.run_mode, a.flex_fallback_after) == ("flex", 1800.0)
    assert a.auto_choice == "as_original: as the run it retries chose (deadline: …)"
