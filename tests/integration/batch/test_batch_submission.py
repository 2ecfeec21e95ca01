"""B2 (the three submission outcomes), B3 (only unanswered records are sent; a batch
still out is collected) and B4 (collect only once every file of the action is out)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from batch_support import (
    MAIN,
    WORKFLOW,
    batches,
    counts,
    creates,
    events,
    make,
    ops,
    params,
    rows,
    run,
    store,
)

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_jsonl


def _create_fault(provider: str, fault: dict[str, Any], nth: int = 2) -> dict[str, Any]:
    """``fault`` on the ``nth`` batch.create only (files are sent in name order)."""
    return {"provider": provider, "op": "batch.create", "nth": nth, "times": 1, "fault": fault}


# -- B2 refused -------------------------------------------------------------------------------

REFUSALS = [
    ("openai", {"http": 429, "code": "insufficient_quota"}),
    ("anthropic", {"http": 400, "message": "bad request in the file"}),
]


@pytest.mark.parametrize(("provider", "fault"), REFUSALS, ids=["openai-quota", "anthropic-400"])
def test_b2_refused_every_file_is_tried_then_the_action_fails_naming_the_refused_file(
    provider: str, fault: dict[str, Any], emulator: RunningEmulator, project: Path
) -> None:
    keys = make(project, provider, {"a": 2, "b": 2, "c": 2})
    emulator.add_fault(_create_fault(provider, fault))

    first = run(project)

    assert first.exit_code == 1
    assert first.summary["state"] == "failed"
    assert creates(emulator.stats(), provider) == 3  # the walk went on past the refusal
    classify = rows(project)
    for key in keys["b.jsonl"]:
        assert classify[key]["status"] == "failed"
        assert classify[key]["reason"] == "batch_refused"
        assert "b.jsonl" in classify[key]["detail"]
    for key in keys["a.jsonl"] + keys["c.jsonl"]:
        assert (classify[key]["status"], classify[key]["reason"]) == (
            "skipped",
            "batch_outstanding",
        )
    with store(project) as s:
        state, detail = s.action_states(first.summary["run_id"])["classify"]
    assert state == "failed" and "b.jsonl" in detail and "a.jsonl" not in detail
    # The batches accepted for the other files stay out (B0): nothing is cancelled.
    out = {b.file: b.state for b in batches(project)}
    assert out["b.jsonl"] == "refused"
    assert out["a.jsonl"] in ("submitted", "running") and out["c.jsonl"] in ("submitted", "running")
    assert ops(emulator.stats(), provider).get("batch.cancel", 0) == 0

    # The next run sends the refused file again (R1 d) and adopts the two batches out.
    emulator.advance(120)
    second = run(project)
    assert second.exit_code == 75, second.notes
    assert creates(emulator.stats(), provider) == 4
    emulator.advance(120)
    third = run(project)
    assert third.exit_code == 0, third.notes
    assert counts(third)["answered"] == 6
    assert emulator.stats()["duplicate_answers"] == 0


# -- B2 wait ----------------------------------------------------------------------------------


@params(MAIN)
def test_b2_wait_a_429_that_says_when_is_waited_out_spending_no_attempt(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, retry="{max_attempts: 1, backoff: {initial: 10ms, max: 20ms}}")
    emulator.add_fault(_create_fault(provider, {"http": 429, "retry_after": 1}, nth=1))

    started = time.monotonic()
    first = run(project)

    assert time.monotonic() - started >= 1.0
    assert first.exit_code == 75
    assert counts(first)["batches_out"] == 2
    assert creates(emulator.stats(), provider) == 3
    assert any(e["data"].get("reason") == "provider_limit" for e in events(project, kind="waiting"))
    with store(project) as s:
        for b in batches(project):
            assert {i.attempt for i in s.iter_batch_items(b.key)} == {1}
    emulator.advance(120)
    second = run(project)
    assert second.exit_code == 0, second.notes
    assert counts(second)["answered"] == 5


# -- B2 unknown -------------------------------------------------------------------------------

LOST = [{"http": 503}, {"drop_connection": True}]


LOST_CASES = [("openai", LOST[1]), ("anthropic", LOST[0]), ("gemini", LOST[1]), ("groq", LOST[0])]


@pytest.mark.parametrize(
    ("provider", "fault"),
    LOST_CASES,
    ids=["openai-dropped", "anthropic-5xx", "gemini-dropped", "groq-5xx"],
)
def test_b2_unknown_an_accepted_batch_whose_answer_was_lost_is_found_never_sent_twice(
    provider: str, fault: dict[str, Any], emulator: RunningEmulator, project: Path
) -> None:
    # Files of different sizes: Anthropic's candidate matching (same request count in
    # the intent's time window) finds exactly one.
    make(project, provider, {"a": 3, "b": 2})
    emulator.add_fault(_create_fault(provider, {**fault, "after_create": True}))

    first = run(project)

    assert first.exit_code == 75, first.notes
    stats = emulator.stats()
    assert creates(stats, provider) == 2
    assert len(stats["batches"]) == 2
    assert {b.provider_batch_id for b in batches(project)} == {b["id"] for b in stats["batches"]}
    assert [e["data"]["file"] for e in events(project, kind="batch_adopted")] == ["b.jsonl"]

    emulator.advance(120)
    second = run(project)
    assert second.exit_code == 0, second.notes
    assert counts(second)["answered"] == 5
    stats = emulator.stats()
    assert creates(stats, provider) == 2 and stats["duplicate_answers"] == 0


@params(("openai", "gemini"))
def test_b2_unknown_a_submission_the_provider_never_got_is_sent_again_once(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, {"a": 3, "b": 2})
    emulator.add_fault(_create_fault(provider, {"http": 503}))

    first = run(project)

    assert first.exit_code == 75, first.notes
    stats = emulator.stats()
    assert creates(stats, provider) == 3  # one lost, found absent by key, sent again
    assert len(stats["batches"]) == 2
    assert ops(stats, provider).get("batch.list", 0) >= 1
    emulator.advance(120)
    assert run(project).exit_code == 0
    assert emulator.stats()["duplicate_answers"] == 0


def test_b2_unknown_anthropic_without_a_certain_answer_pauses_naming_batch_resolve(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "anthropic", {"a": 3, "b": 2})
    emulator.add_fault(_create_fault("anthropic", {"http": 503}))

    first = run(project)
    again = run(project)

    for result in (first, again):
        assert result.exit_code == 75
        assert any("agac batch resolve" in n and "b.jsonl" in n for n in result.notes), result.notes
    stats = emulator.stats()
    assert creates(stats, "anthropic") == 2 and len(stats["batches"]) == 1
    states = {b.file: b.state for b in batches(project)}
    assert states["b.jsonl"] == "unknown" and states["a.jsonl"] != "unknown"


def test_b2_unknown_anthropic_never_adopts_a_batch_another_file_holds(
    emulator: RunningEmulator, project: Path
) -> None:
    # Same sizes: a's batch is the only candidate in the window with b's request count.
    make(project, "anthropic", {"a": 2, "b": 2})
    emulator.add_fault(_create_fault("anthropic", {"http": 503}))

    first = run(project)

    assert first.exit_code == 75
    held = [b.provider_batch_id for b in batches(project) if b.provider_batch_id]
    assert len(held) == len(set(held)), "two intents hold the same provider batch"
    assert {b.file: b.state for b in batches(project)}["b.jsonl"] == "unknown"


# -- B3 ---------------------------------------------------------------------------------------


@params(MAIN)
def test_b3_running_again_sends_only_records_without_an_answer(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, {"a": 2, "b": 2})
    assert run(project).exit_code == 75
    emulator.advance(120)
    assert run(project).exit_code == 0
    write_jsonl(
        project / "data" / "a.jsonl",
        [
            {"id": "a0", "text": "item a0 says no"},
            {"id": "a1", "text": "item a1 says yes"},
            {"id": "a9", "text": "a new record"},
        ],
    )

    third = run(project)

    assert third.exit_code == 75
    stats = emulator.stats()
    assert creates(stats, provider) == 3
    assert sorted(b["requests"] for b in stats["batches"]) == [1, 2, 2]
    emulator.advance(120)
    fourth = run(project)
    assert fourth.exit_code == 0
    assert (counts(fourth)["answered"], counts(fourth)["reused"], counts(fourth)["calls"]) == (
        5,
        4,
        1,
    )


@params(MAIN)
def test_b3_a_batch_still_out_is_collected_never_sent_again(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider)
    assert run(project).exit_code == 75
    again = run(project)
    assert again.exit_code == 75 and counts(again)["batches_out"] == 2
    assert creates(emulator.stats(), provider) == 2

    emulator.advance(120)
    assert run(project).exit_code == 0
    stats = emulator.stats()
    assert creates(stats, provider) == 2 and stats["duplicate_answers"] == 0


@params(("openai",))
def test_b3_a_carried_over_failure_is_not_sent_again(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(
        project, provider, {"a": 3}, retry="{max_attempts: 1, backoff: {initial: 10ms, max: 20ms}}"
    )
    emulator.add_fault(_create_fault(provider, {"batch_drop_records": 1}, nth=1))
    assert run(project).exit_code == 75
    emulator.advance(120)
    second = run(project)
    assert second.summary["state"] == "partial"

    third = run(project)

    assert third.summary["run_id"] != second.summary["run_id"]
    assert third.summary["state"] == "partial"
    assert counts(third)["reasons"] == {"batch_not_returned": 1}
    assert counts(third)["calls"] == 0
    assert creates(emulator.stats(), provider) == 1


# -- B4 ---------------------------------------------------------------------------------------


@params(MAIN)
def test_b4_batches_wait_uncollected_while_a_file_of_the_action_cannot_be_sent(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, {"a": 2, "b": 2, "c": 2})
    refuse = {"provider": provider, "op": "batch.create", "match": {}, "fault": {"http": 400}}
    emulator.add_fault(_create_fault(provider, {"http": 400}), {**refuse, "nth": 4, "times": 1})
    assert run(project).exit_code == 1  # b refused, a and c out
    emulator.advance(120)  # a's and c's batches have ended at the provider

    second = run(project)  # b refused again

    assert second.exit_code == 1
    read = ops(emulator.stats(), provider)
    assert read.get("file.download", 0) == 0 and read.get("batch.results", 0) == 0
    assert {b.file: b.collected_by for b in batches(project) if b.file != "b.jsonl"} == {
        "a.jsonl": None,
        "c.jsonl": None,
    }
    third = run(project)  # b is sent: every file is out, a and c are read now
    assert third.exit_code == 75
    assert counts(third)["answered"] == 4
    emulator.advance(120)
    assert run(project).exit_code == 0


@params(MAIN)
def test_b4_a_waiting_run_names_each_batch_and_file_it_waits_on(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, {"a": 2, "b": 2}, summarize=False, second="batch")

    first = run(project)

    assert first.exit_code == 75
    ids = {b.file: b.provider_batch_id for b in batches(project)}
    waiting = first.summary["waiting_on"]
    out = [(w["action"], w["file"], w["batch_id"]) for w in waiting if w["batch_id"]]
    assert out == [("classify", "a.jsonl", ids["a.jsonl"]), ("classify", "b.jsonl", ids["b.jsonl"])]
    held = {w["file"]: w for w in waiting if not w["batch_id"]}
    assert {f: (w["action"], w["state"], w["waits_on"]) for f, w in held.items()} == {
        f: ("tag", "waiting", [ids[f]]) for f in ("a.jsonl", "b.jsonl")
    }
    [note] = [n for n in first.notes if n.startswith("tag: waiting until every input file")]
    for f in ("a.jsonl", "b.jsonl"):
        assert f"{f} waits on classify's batch {ids[f]}" in note
    assert api.status(WORKFLOW, project)["waiting_on"] == waiting  # as `agac status` says it

    emulator.advance(120)
    second = run(project)  # classify read; tag's batches sent
    assert second.exit_code == 75
    assert {(w["action"], w["file"]) for w in second.summary["waiting_on"]} == {
        ("tag", "a.jsonl"),
        ("tag", "b.jsonl"),
    }
    emulator.advance(120)
    done = run(project)
    assert done.exit_code == 0 and "waiting_on" not in done.summary


@params(MAIN)
def test_b2_a_run_held_back_by_a_refused_file_names_the_batches_still_out(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    keys = make(project, provider, {"a": 2, "b": 2})
    emulator.add_fault(_create_fault(provider, {"http": 400}, nth=2))

    refused = run(project)

    assert refused.exit_code == 1 and refused.summary["state"] == "failed"
    (out,) = [b for b in batches(project) if b.state in ("submitted", "running")]
    assert [(w["action"], w["file"], w["batch_id"]) for w in refused.summary["waiting_on"]] == [
        ("classify", out.file, out.provider_batch_id)
    ]
    classify = rows(project)
    for key in keys[out.file]:
        assert classify[key]["reason"] == "batch_outstanding"
        assert (
            out.provider_batch_id in classify[key]["detail"] and out.file in classify[key]["detail"]
        )
