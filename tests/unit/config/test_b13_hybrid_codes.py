"""B13: ``hybrid: {live_after}`` is read, and refused where it cannot work, at the line
of the key."""

from __future__ import annotations

DEADLINE = """
input: {path: data.jsonl}
deadline: 24h
actions:
"""
BATCH = """
  - name: a
    model: openai/gpt-4o-mini
    prompt: x
    run_mode: batch
"""


def test_b13_hybrid_is_read_in_seconds_into_the_action(wf, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    checked = wf.check(DEADLINE + BATCH + "    hybrid: {live_after: 20h}\n")
    assert [p.code for p in checked.problems if p.severity == "error"] == []
    assert checked.workflow is not None
    assert checked.workflow.actions[0].live_after == 20 * 3600


def test_b13_hybrid_without_a_deadline_is_located(wf) -> None:
    checked = wf.check(
        "input: {path: data.jsonl}\nactions:\n" + BATCH + "    hybrid: {live_after: 20h}\n"
    )
    assert checked.one("hybrid_needs_deadline").line == checked.line_of("hybrid:")
    assert checked.workflow is None


def test_b13_hybrid_on_an_online_action_is_located(wf) -> None:
    checked = wf.check(
        DEADLINE + BATCH.replace("batch", "online") + "    hybrid: {live_after: 20h}\n"
    )
    assert checked.one("invalid_hybrid").line == checked.line_of("hybrid:")


def test_b13_live_after_not_before_the_deadline_is_located(wf) -> None:
    checked = wf.check(DEADLINE + BATCH + "    hybrid:\n      live_after: 24h\n")
    p = checked.one("invalid_hybrid")
    assert p.line == checked.line_of("live_after") and "deadline" in p.message


def test_b13_live_after_must_be_a_positive_duration(wf) -> None:
    checked = wf.check(DEADLINE + BATCH + "    hybrid:\n      live_after: 50%\n")
    assert checked.one("invalid_hybrid").line == checked.line_of("live_after")


def test_i35_8_hybrid_in_defaults_fills_the_batch_actions(wf, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    checked = wf.check(
        "input: {path: data.jsonl}\ndeadline: 24h\ndefaults:\n"
        "  hybrid: {live_after: 1h}\nactions:\n"
        + BATCH
        + "  - name: online\n    model: openai/gpt-4o-mini\n    prompt: 'x {{ source.text }}'\n"
    )
    assert [p.code for p in checked.problems if p.severity == "error"] == []
    assert checked.workflow is not None
    assert [a.live_after for a in checked.workflow.actions] == [3600, None]


def test_i35_8_hybrid_in_defaults_still_needs_a_deadline(wf) -> None:
    checked = wf.check(
        "input: {path: data.jsonl}\ndefaults:\n  hybrid: {live_after: 1h}\nactions:\n" + BATCH
    )
    assert "hybrid_needs_deadline" in [p.code for p in checked.problems]


def test_b13_hybrid_on_an_auto_action_is_accepted(wf, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    checked = wf.check(
        DEADLINE
        + BATCH.replace("run_mode: batch", "run_mode: auto")
        + "    hybrid: {live_after: 20h}\n"
    )
    assert [p.code for p in checked.problems if p.severity == "error"] == []
    assert checked.workflow is not None and checked.workflow.actions[0].live_after == 72000
