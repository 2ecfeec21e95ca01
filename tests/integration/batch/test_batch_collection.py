"""Collecting batches: B5 (provider unreachable while collecting), B6 (records left out),
B7 (batches ended without results), B8 (cancelling; Anthropic canceled mid-run) and B9
(a status no mapping knows)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from batch_support import (
    MAIN,
    batches,
    counts,
    creates,
    events,
    make,
    ops,
    params,
    retry,
    rows,
    run,
    store,
)

from agac.emulator.testing import RunningEmulator

ONE_ATTEMPT = "{max_attempts: 1, backoff: {initial: 10ms, max: 20ms}}"
#: The request that reads a batch's results.
READ_OP = {
    "openai": "file.download",
    "groq": "file.download",
    "gemini": "file.download",
    "anthropic": "batch.results",
    "mistral": "file.download",
    "together": "file.download",
}


def _create_fault(provider: str, fault: dict[str, Any], nth: int = 1) -> dict[str, Any]:
    return {"provider": provider, "op": "batch.create", "nth": nth, "times": 1, "fault": fault}


# -- B5 ---------------------------------------------------------------------------------------


GET_5XX = ("batch.get", {"http": 503})
READ_DROPPED = ("results", {"drop_connection": True})


@pytest.mark.parametrize(
    ("provider", "op", "fault"),
    [("openai", *GET_5XX), ("anthropic", *READ_DROPPED)],
    ids=["openai-get-5xx", "anthropic-read-dropped"],
)
def test_b5_a_batch_that_cannot_be_read_is_left_named_and_collected_by_the_next_run(
    provider: str, op: str, fault: dict[str, Any], emulator: RunningEmulator, project: Path
) -> None:
    keys = make(project, provider, {"a": 3, "b": 2})
    assert run(project).exit_code == 75
    emulator.advance(120)
    op = READ_OP[provider] if op == "results" else op
    emulator.add_fault({"provider": provider, "op": op, "times": 1, "fault": fault})

    second = run(project)

    assert second.exit_code == 75
    named = [f for f in ("a.jsonl", "b.jsonl") if any(f in n and "B5" in n for n in second.notes)]
    assert len(named) == 1, second.notes
    (left,) = named
    (read,) = {"a.jsonl", "b.jsonl"} - {left}
    classify = rows(project)
    assert all(classify[k]["status"] == "answered" for k in keys[read])
    assert all(k not in classify for k in keys[left])
    assert counts(second)["batches_out"] == 1

    third = run(project)
    assert third.exit_code == 0, third.notes
    assert counts(third)["answered"] == 5
    stats = emulator.stats()
    assert stats["duplicate_answers"] == 0 and creates(stats, provider) == 2
    assert sorted(e["data"]["file"] for e in events(project, kind="collected")) == [
        "a.jsonl",
        "b.jsonl",
    ]


@pytest.mark.parametrize(
    ("provider", "op", "fault"),
    [("openai", *READ_DROPPED), ("anthropic", *GET_5XX)],
    ids=["openai-read-dropped", "anthropic-get-5xx"],
)
def test_b5_while_the_provider_cannot_be_reached_the_run_pauses_naming_the_files(
    provider: str, op: str, fault: dict[str, Any], emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, {"a": 3, "b": 2})
    assert run(project).exit_code == 75
    emulator.advance(120)
    op = READ_OP[provider] if op == "results" else op
    emulator.add_fault({"provider": provider, "op": op, "fault": fault})

    second = run(project)

    assert second.exit_code == 75
    for name in ("a.jsonl", "b.jsonl"):
        assert any(name in n and "B5" in n for n in second.notes), second.notes
    assert rows(project) == {}
    assert counts(second)["batches_out"] == 2

    emulator.clear_faults()
    third = run(project)
    assert third.exit_code == 0, third.notes
    assert counts(third)["answered"] == 5
    stats = emulator.stats()
    assert stats["duplicate_answers"] == 0 and creates(stats, provider) == 2
    assert sorted(e["data"]["file"] for e in events(project, kind="collected")) == [
        "a.jsonl",
        "b.jsonl",
    ]


# -- B6 ---------------------------------------------------------------------------------------


@params(MAIN)
def test_b6_records_left_out_go_into_a_retry_batch_while_attempts_remain(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, {"a": 4})
    emulator.add_fault(_create_fault(provider, {"batch_drop_records": 2}))
    assert run(project).exit_code == 75
    emulator.advance(120)

    second = run(project)

    assert second.exit_code == 75
    stats = emulator.stats()
    assert [b["requests"] for b in stats["batches"]] == [4, 2]
    (first_batch, retry_batch) = batches(project)
    with store(project) as s:
        again = sorted(i.unit_key for i in s.iter_batch_items(retry_batch.key))
        assert {i.attempt for i in s.iter_batch_items(retry_batch.key)} == {2}
        left_out = sorted(
            i.unit_key
            for i in s.iter_batch_items(first_batch.key)
            if i.custom_id in stats["batches"][0]["dropped"]
        )
    assert again == left_out
    emulator.advance(120)
    third = run(project)
    assert third.exit_code == 0
    assert counts(third)["answered"] == 4
    assert emulator.stats()["duplicate_answers"] == 0


@params(MAIN)
def test_b6_records_left_out_with_no_attempt_left_fail_batch_not_returned(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, {"a": 4}, retry=ONE_ATTEMPT)
    emulator.add_fault(_create_fault(provider, {"batch_drop_records": 2}))
    first = run(project)
    emulator.advance(120)

    second = run(project)

    assert second.exit_code == 1 and second.summary["state"] == "partial"
    classify, summarize = rows(project), rows(project, "summarize")
    failed = sorted(k for k, r in classify.items() if r["status"] == "failed")
    assert len(failed) == 2
    assert {classify[k]["reason"] for k in failed} == {"batch_not_returned"}
    assert {(summarize[k]["status"], summarize[k]["reason"]) for k in failed} == {
        ("skipped", "upstream_failed")
    }
    assert counts(second, "summarize")["answered"] == 2

    again = retry(project)
    assert again.exit_code == 75
    assert again.summary["retry_of"] == first.summary["run_id"]
    assert sorted(b["requests"] for b in emulator.stats()["batches"]) == [2, 4]
    emulator.advance(120)
    done = run(project)
    assert done.exit_code == 0, done.notes
    assert done.summary["run_id"] == again.summary["run_id"]
    assert counts(done)["answered"] == 4 and counts(done, "summarize")["answered"] == 4
    assert emulator.stats()["duplicate_answers"] == 0


@pytest.mark.parametrize("end", ["expired", "cancelled"])
def test_b6_anthropic_expired_and_canceled_items_fail_with_their_reason(
    end: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, "anthropic", {"a": 3}, retry=ONE_ATTEMPT)
    emulator.add_fault(_create_fault("anthropic", {"batch_end": end, "answered": 1}))
    assert run(project).exit_code == 75
    emulator.advance(120)

    second = run(project)

    assert second.summary["state"] == "partial"
    statuses = sorted((r["status"], r["reason"]) for r in rows(project).values())
    assert statuses == [("answered", None)] + [("failed", f"batch_{end}")] * 2


# -- B7 ---------------------------------------------------------------------------------------

B7_CASES = [
    ("openai", "expired"),
    ("openai", "cancelled"),
    ("groq", "failed"),
    ("gemini", "expired"),
    # Mistral: a job past its timeout_hours ends TIMEOUT_EXCEEDED; a failed job FAILED.
    ("mistral", "expired"),
    ("mistral", "failed"),
    # Together: a batch past its 24 hours ends EXPIRED.
    ("together", "expired"),
]


@pytest.mark.parametrize(("provider", "end"), B7_CASES, ids=[f"{p}-{e}" for p, e in B7_CASES])
def test_b7_a_batch_ended_without_results_is_not_read_and_fails_that_files_records(
    provider: str, end: str, emulator: RunningEmulator, project: Path
) -> None:
    keys = make(project, provider, {"a": 2, "b": 2})
    emulator.add_fault(_create_fault(provider, {"batch_end": end, "answered": 1}, nth=2))
    assert run(project).exit_code == 75
    emulator.advance(120)
    (bad,) = [b.provider_batch_id for b in batches(project) if b.file == "b.jsonl"]

    second = run(project)

    assert second.exit_code == 1 and second.summary["state"] == "partial"
    classify, summarize = rows(project), rows(project, "summarize")
    for key in keys["b.jsonl"]:
        assert (classify[key]["status"], classify[key]["reason"]) == ("failed", f"batch_{end}")
        assert "b.jsonl" in classify[key]["detail"] and bad in classify[key]["detail"]
        assert (summarize[key]["status"], summarize[key]["reason"]) == (
            "skipped",
            "upstream_failed",
        )
    assert all(classify[k]["status"] == "answered" for k in keys["a.jsonl"])
    if provider not in ("gemini", "mistral"):
        # Gemini's and a small Mistral batch's results come with the batch itself
        # a's only; Together reports no counts, so what its expired batch billed is counted
        # from its output file (no answer is taken from it).
        reads = 2 if (provider, end) == ("together", "expired") else 1
        assert ops(emulator.stats(), provider).get(READ_OP[provider], 0) == reads
    ended = [e["data"] for e in events(project, kind="batch_ended_unread")]
    assert [(d["file"], d["batch_id"]) for d in ended] == [("b.jsonl", bad)]

    if end != "expired":
        return
    # Running again carries the failures; `agac retry` sends every record of the file,
    # including the one the provider answered before it expired the batch.
    assert run(project).exit_code == 1
    assert creates(emulator.stats(), provider) == 2
    again = retry(project)
    assert again.exit_code == 75
    assert sorted(b["requests"] for b in emulator.stats()["batches"]) == [2, 2, 2]
    emulator.advance(120)
    done = run(project)
    assert done.exit_code == 0, done.notes
    assert counts(done)["answered"] == 4
    assert emulator.stats()["duplicate_answers"] == 1  # billed twice, as the seed accepts


@params(("openai",))
def test_b7_when_every_files_batch_ends_unread_the_action_fails_and_the_next_run_sends_every_file(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, {"a": 2, "b": 2})
    emulator.add_fault(
        {"provider": provider, "op": "batch.create", "times": 2, "fault": {"batch_end": "expired"}}
    )
    assert run(project).exit_code == 75
    emulator.advance(120)

    second = run(project)

    assert second.exit_code == 1 and second.summary["state"] == "failed"
    assert counts(second)["reasons"] == {"batch_expired": 4}
    with store(project) as s:
        assert s.action_states(second.summary["run_id"])["classify"][0] == "failed"
    third = run(project)
    assert third.exit_code == 75
    assert creates(emulator.stats(), provider) == 4
    emulator.advance(120)
    assert run(project).exit_code == 0


#: What the provider says, asked right before reading, about a batch the poll saw ended.
TURNED = {
    "openai": ("expired", "batch_expired"),
    "groq": ("failed", "batch_failed"),
    "gemini": ("BATCH_STATE_CANCELLED", "batch_cancelled"),
}


@pytest.mark.parametrize("provider", list(TURNED))
def test_b7_a_batch_reported_bad_right_before_reading_is_not_read_and_fails_that_files_records(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    keys = make(project, provider, {"a": 2, "b": 2})
    assert run(project).exit_code == 75
    emulator.advance(120)
    raw, reason = TURNED[provider]
    # Each batch is polled (its 1st get) and then fetched again right before reading
    # (its 2nd): the first batch polled turns bad between the two.
    emulator.add_fault(
        {
            "provider": provider,
            "op": "batch.get",
            "nth": 2,
            "times": 1,
            "fault": {"batch_status": raw},
        }
    )
    reads = ops(emulator.stats(), provider).get(READ_OP[provider], 0)

    second = run(project)

    classify = rows(project)
    bad = {f for f, ks in keys.items() if any(classify[k]["status"] == "failed" for k in ks)}
    assert len(bad) == 1, classify
    (bad_file,) = bad
    (good_file,) = set(keys) - bad
    (bad_id,) = [b.provider_batch_id for b in batches(project) if b.file == bad_file]
    for key in keys[bad_file]:
        assert (classify[key]["status"], classify[key]["reason"]) == ("failed", reason)
        assert (
            bad_id in classify[key]["detail"] and "right before reading" in classify[key]["detail"]
        )
    assert all(classify[k]["status"] == "answered" for k in keys[good_file])
    assert second.exit_code == 1 and second.summary["state"] == "partial"
    if provider != "gemini":  # Gemini's inline results come with the batch itself
        assert ops(emulator.stats(), provider)[READ_OP[provider]] == reads + 1  # the good one
    ended = [e["data"] for e in events(project, kind="batch_ended_unread")]
    assert [(d["file"], d["batch_id"], d["reason"]) for d in ended] == [(bad_file, bad_id, reason)]
    # What the provider answered and billed in it is in the ledger, as unread.
    assert ended[0]["billed_unread"] == 2
    assert _ledgered(project) == emulator.stats()["answered"]


def test_b7_an_anthropic_batch_not_ended_right_before_reading_is_read_by_a_later_run(
    emulator: RunningEmulator, project: Path
) -> None:
    keys = make(project, "anthropic", {"a": 2})
    assert run(project).exit_code == 75
    emulator.advance(120)
    emulator.add_fault(
        {
            "provider": "anthropic",
            "op": "batch.get",
            "nth": 2,
            "times": 1,
            "fault": {"batch_status": "canceling"},
        }
    )

    second = run(project)

    assert second.exit_code == 75
    (batch_id,) = [b.provider_batch_id for b in batches(project)]
    assert any(batch_id in n and "right before reading" in n for n in second.notes), second.notes
    assert ops(emulator.stats(), "anthropic").get("batch.results", 0) == 0
    third = run(project)
    assert third.exit_code == 0, third.notes
    assert all(r["status"] == "answered" for k, r in rows(project).items() if k in keys["a.jsonl"])
    assert emulator.stats()["duplicate_answers"] == 0


def _ledgered(root: Path) -> int:
    """Model answers in the cost ledger of every run of the project (what was billed)."""
    with store(root) as s:
        runs = [r.id for r in s.list_runs(limit=100)]
        return sum(r.calls for r in s.usage_totals(runs) if r.kind == "llm")


# -- B8 ---------------------------------------------------------------------------------------


def _cancel_at_provider(provider: str, batch_id: str) -> None:
    """Cancel a batch as a person would, with the provider's own SDK."""
    if provider == "openai":
        import openai

        with openai.OpenAI() as client:
            client.batches.cancel(batch_id)
    elif provider == "together":
        from together import Together

        with Together() as client:
            client.batches.cancel(batch_id)
    elif provider == "mistral":
        from mistralai.client import Mistral

        with Mistral(server_url=os.environ["MISTRAL_BASE_URL"]) as mistral:
            mistral.batch.jobs.cancel(job_id=batch_id)
    else:
        import anthropic

        with anthropic.Anthropic() as client:
            client.messages.batches.cancel(batch_id)


@params(MAIN)
def test_b8_a_batch_still_cancelling_has_not_ended(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    keys = make(project, provider, {"a": 2, "b": 2}, retry=ONE_ATTEMPT)
    assert run(project).exit_code == 75
    ids = {b.file: b.provider_batch_id for b in batches(project)}
    emulator.add_fault(
        {"provider": provider, "op": "batch.cancel", "fault": {"batch_stuck_cancelling": True}}
    )
    emulator.advance(30)  # both batches are half way through
    _cancel_at_provider(provider, ids["b.jsonl"])
    emulator.advance_batch(ids["a.jsonl"])

    second = run(project)

    assert second.exit_code == 75
    # Together has no cancelling status: a batch being cancelled reads IN_PROGRESS until it
    # is CANCELLED, and the run waits for it all the same.
    word = "IN_PROGRESS" if provider == "together" else "cancelling"
    assert any(ids["b.jsonl"] in n and word in n for n in second.notes), second.notes
    classify = rows(project)
    assert all(classify[k]["status"] == "answered" for k in keys["a.jsonl"])
    assert all(k not in classify for k in keys["b.jsonl"])

    emulator.clear_faults()
    emulator.advance(30)
    third = run(project)
    assert third.summary["state"] == "partial"
    b_rows = sorted(
        (rows(project)[k]["status"], rows(project)[k]["reason"]) for k in keys["b.jsonl"]
    )
    if provider == "anthropic":
        # Canceled while running: a result per request, read like any other.
        assert b_rows == [("answered", None), ("failed", "batch_cancelled")]
        assert ops(emulator.stats(), provider)["batch.results"] == 2
    else:
        assert b_rows == [("failed", "batch_cancelled")] * 2
        # Together's billed work of the cancelled batch is counted from its output file;
        # a small Mistral batch's results come inline with the job (no file).
        downloads = {"together": 2, "mistral": 0}.get(provider, 1)
        assert ops(emulator.stats(), provider).get("file.download", 0) == downloads


# -- B9 ---------------------------------------------------------------------------------------


@params(MAIN)
def test_b9_a_status_no_mapping_knows_is_still_running_named_and_asked_again(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider)
    assert run(project).exit_code == 75
    emulator.advance(120)
    emulator.add_fault(
        {"provider": provider, "op": "batch.get", "fault": {"batch_status": "rebalancing"}}
    )
    ids = [b.provider_batch_id for b in batches(project)]

    second = run(project)

    assert second.exit_code == 75
    for batch_id in ids:
        assert any(batch_id in n and "rebalancing" in n for n in second.notes), second.notes
    polled = ops(emulator.stats(), provider)["batch.get"]
    assert ops(emulator.stats(), provider).get(READ_OP[provider], 0) == 0
    third = run(project)
    assert third.exit_code == 75
    assert ops(emulator.stats(), provider)["batch.get"] >= polled + 2
    emulator.clear_faults()
    assert run(project).exit_code == 0
