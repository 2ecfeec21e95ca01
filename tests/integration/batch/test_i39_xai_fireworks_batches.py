"""xAI and Fireworks batches end to end through ``agac run`` and ``agac retry`` against the
emulator: one refused file, one missing record and one expired batch, checked record by
record and against the emulator's journal (no answer paid twice beyond what an expired
batch billed, the ledger equal to what the provider billed).

The two differ where their APIs do: an xAI batch past its expiry is given up unread (B7:
its records fail ``batch_expired``, the answer it billed is paid again on retry), while a
Fireworks job past its 24 hours keeps the rows it finished — agac reads them, and the
requests it never ran are not returned (B6)."""

from __future__ import annotations

from pathlib import Path

import pytest
from batch_support import creates, make, params, retry, rows, run, store

from agac.emulator.testing import RunningEmulator

ONE_ATTEMPT = "{max_attempts: 1, backoff: {initial: 10ms, max: 20ms}}"
MODELS = {
    "xai": "xai/grok-3-mini",
    "fireworks": "fireworks/accounts/fireworks/models/llama-v3p1-8b-instruct",
}


def _run_until_final(root: Path, emulator: RunningEmulator, result: object) -> object:
    for _ in range(6):
        if result.exit_code != 75:  # type: ignore[attr-defined]
            return result
        emulator.advance(120)
        result = run(root)
    raise AssertionError("the run did not end")


def _ledgered(root: Path) -> int:
    """Model answers in the cost ledger of every run of the project."""
    with store(root) as s:
        runs = [r.id for r in s.list_runs(limit=100)]
        return sum(r.calls for r in s.usage_totals(runs) if r.kind == "llm")


@params(tuple(MODELS))
def test_i39_batch_with_a_refused_file_a_missing_record_and_an_expired_batch(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    keys = make(
        project,
        MODELS[provider],
        {"a": 2, "b": 2, "c": 2},
        summarize=False,
        retry=ONE_ATTEMPT,
    )
    create = {"provider": provider, "op": "batch.create", "times": 1}
    emulator.add_fault(
        {**create, "nth": 1, "fault": {"http": 400}},  # a is refused
        {**create, "nth": 2, "fault": {"batch_drop_records": 1}},  # b loses a record
        {**create, "nth": 3, "fault": {"batch_end": "expired", "answered": 1}},  # c
    )

    # A refused file fails the action and the run (B2); b's and c's batches stay out.
    first = run(project)
    assert first.exit_code == 1 and first.summary["state"] == "failed"
    classify = rows(project)
    assert {classify[k]["reason"] for k in keys["a.jsonl"]} == {"batch_refused"}

    emulator.advance(120)
    ended = _run_until_final(project, emulator, run(project))
    assert ended.summary["state"] == "partial"  # type: ignore[attr-defined]
    classify = rows(project)
    assert all(classify[k]["status"] == "answered" for k in keys["a.jsonl"])
    b_reasons = sorted(str(classify[k]["reason"]) for k in keys["b.jsonl"])
    assert b_reasons == ["None", "batch_not_returned"]
    c_reasons = sorted(str(classify[k]["reason"]) for k in keys["c.jsonl"])
    if provider == "xai":  # given up unread (B7)
        assert c_reasons == ["batch_expired", "batch_expired"]
    else:  # its finished row read, the other not returned (B6)
        assert c_reasons == ["None", "batch_not_returned"]

    # agac retry sends the failed records again, to completion.
    again = retry(project)
    assert again.exit_code == 75
    done = _run_until_final(project, emulator, again)
    assert done.exit_code == 0, done.notes  # type: ignore[attr-defined]
    outcome = rows(project)
    assert set(outcome) == {k for ks in keys.values() for k in ks}
    assert all(r["status"] == "answered" for r in outcome.values()), outcome
    stats = emulator.stats()
    # Only xAI's expired batch had billed an answer agac could not take: paid twice.
    assert stats["duplicate_answers"] == (1 if provider == "xai" else 0)
    # a (refused), b, c, a again, then the retry's b and c.
    assert creates(stats, provider) == 6
    # The ledger holds every answer billed, the one of the expired batch included.
    assert _ledgered(project) == stats["answered"]


@pytest.mark.parametrize("provider", tuple(MODELS))
def test_i39_batch_runs_priced_at_the_batch_tier(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    """Both are priced from genai-prices: a batch answer at half the live price."""
    make(project, MODELS[provider], {"a": 2}, summarize=False)
    assert run(project).exit_code == 75
    emulator.advance(120)
    assert run(project).exit_code == 0
    with store(project) as s:
        (run_row,) = s.list_runs(limit=1)
        totals = [r for r in s.usage_totals([run_row.id]) if r.action == "classify"]
    assert sum(r.calls for r in totals) == 2
    assert sum(float(r.cost_usd) for r in totals) > 0
