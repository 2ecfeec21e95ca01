"""Batch cost at the batch tier, and a mixed workflow (batch → online → batch) over three
files with a refused file, dropped records and an expired batch, run to completion with
``agac retry`` and checked record by record."""

from __future__ import annotations

from pathlib import Path

import pytest
from batch_support import creates, make, params, retry, rows, run, store

from agac import api
from agac.emulator.testing import RunningEmulator

ONE_ATTEMPT = "{max_attempts: 1, backoff: {initial: 10ms, max: 20ms}}"


def test_batch_usage_is_priced_at_the_batch_tier(emulator: RunningEmulator, tmp_path: Path) -> None:
    batch_root, live_root = tmp_path / "batch", tmp_path / "live"
    make(batch_root, "openai", summarize=False)
    make(live_root, "openai", summarize=False)
    wf = live_root / "workflows" / "wf.yml"
    wf.write_text(wf.read_text().replace("run_mode: batch", "run_mode: online"))

    assert run(batch_root).exit_code == 75
    emulator.advance(120)
    batched = run(batch_root)
    live = run(live_root)

    assert batched.exit_code == 0 and live.exit_code == 0
    batch_cost, live_cost = _cost(batch_root), _cost(live_root)
    assert live_cost > 0
    assert batch_cost == pytest.approx(live_cost / 2, rel=0.02)
    report = api.cost(batched.summary["run_id"], batch_root)
    assert {r["tier"] for r in report["rows"]} == {"batch"}
    assert report["batch_saved_usd"] > 0  # rounded to the micro-dollar
    assert report["batch_saved_usd"] == pytest.approx(live_cost - batch_cost, abs=1e-6)
    assert api.cost(live.summary["run_id"], live_root)["batch_saved_usd"] == 0


def _cost(root: Path) -> float:
    """The unrounded cost of the classify calls in the root's latest run."""
    with store(root) as s:
        (run_row,) = s.list_runs(limit=1)
        return sum(
            float(r.cost_usd) for r in s.usage_totals([run_row.id]) if r.action == "classify"
        )


def _run_until_final(
    root: Path, emulator: RunningEmulator, result: object, limit: int = 6
) -> object:
    for _ in range(limit):
        if result.exit_code != 75:  # type: ignore[attr-defined]
            return result
        emulator.advance(120)
        result = run(root)
    raise AssertionError("the run did not end")


@params(("openai", "mistral", "together"))
def test_mixed_batch_online_batch_with_a_refused_file_dropped_records_and_an_expired_batch(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    """Mistral's expired batch is a job ended ``TIMEOUT_EXCEEDED``, Together's a batch
    ended ``EXPIRED``."""
    keys = make(project, provider, {"a": 2, "b": 2, "c": 2}, second="batch", retry=ONE_ATTEMPT)
    create = {"provider": provider, "op": "batch.create", "times": 1}
    emulator.add_fault(
        {**create, "nth": 1, "fault": {"http": 400}},  # a refused
        {**create, "nth": 2, "fault": {"batch_drop_records": 1}},  # b drops 1
        {**create, "nth": 3, "fault": {"batch_end": "expired", "answered": 1}},
    )  # c

    # A refused file fails the action as a whole and the run (B2); b's and c's batches
    # stay out and their records are skipped batch_outstanding.
    first = run(project)
    assert first.exit_code == 1 and first.summary["state"] == "failed"
    classify = rows(project)
    assert {classify[k]["reason"] for k in keys["a.jsonl"]} == {"batch_refused"}
    assert {classify[k]["reason"] for k in keys["b.jsonl"] + keys["c.jsonl"]} == {
        "batch_outstanding"
    }

    # The next run sends a again, adopts b and c, and finishes with b's dropped record
    # (no attempt left) and c's expired batch as failures.
    emulator.advance(120)
    ended = _run_until_final(project, emulator, run(project))
    assert ended.summary["state"] == "partial"  # type: ignore[attr-defined]
    classify, summarize, tag = rows(project), rows(project, "summarize"), rows(project, "tag")
    assert all(classify[k]["status"] == "answered" for k in keys["a.jsonl"])
    b_reasons = sorted(str(classify[k]["reason"]) for k in keys["b.jsonl"])
    assert b_reasons == ["None", "batch_not_returned"]
    assert {classify[k]["reason"] for k in keys["c.jsonl"]} == {"batch_expired"}
    for key in keys["a.jsonl"] + keys["b.jsonl"] + keys["c.jsonl"]:
        if classify[key]["status"] == "answered":
            assert summarize[key]["status"] == "answered" and tag[key]["status"] == "answered"
        else:
            assert (summarize[key]["reason"], tag[key]["reason"]) == (
                "upstream_failed",
                "upstream_failed",
            )

    # agac retry sends the three failed records and their dependants, to completion.
    again = retry(project)
    assert again.exit_code == 75
    done = _run_until_final(project, emulator, again)
    assert done.exit_code == 0, done.notes  # type: ignore[attr-defined]
    for action in ("classify", "summarize", "tag"):
        outcome = rows(project, action)
        assert set(outcome) == {k for ks in keys.values() for k in ks}
        assert all(r["status"] == "answered" for r in outcome.values()), (action, outcome)
    stats = emulator.stats()
    # c's expired batch had answered one record before it expired: paid twice (B7).
    assert stats["duplicate_answers"] == 1
    # classify: a (refused), b, c, a again, then the retry's b, c; tag: a, b, then b, c.
    assert creates(stats, provider) == 10
    # The ledger holds every answer billed, the one of the expired batch included.
    assert _ledgered(project) == stats["answered"]


# -- the ledger is what the provider billed -----------------------------------------------------


def _ledgered(root: Path) -> int:
    """Model answers in the cost ledger of every run of the project."""
    with store(root) as s:
        runs = [r.id for r in s.list_runs(limit=100)]
        return sum(r.calls for r in s.usage_totals(runs) if r.kind == "llm")


def _unread(report: dict[str, object]) -> list[dict[str, object]]:
    return [r for r in report["rows"] if r["origin"] == "unread"]  # type: ignore[attr-defined,index]


def test_b7_the_ledger_counts_what_an_expired_batch_answered_and_the_provider_billed(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "openai", {"a": 4}, summarize=False, retry=ONE_ATTEMPT)
    emulator.add_fault(
        {
            "provider": "openai",
            "op": "batch.create",
            "times": 1,
            "fault": {"batch_end": "expired", "answered": 2},
        }
    )
    assert run(project).exit_code == 75
    emulator.advance(120)

    expired = run(project)

    assert expired.summary["actions"]["classify"]["reasons"] == {"batch_expired": 4}
    report = api.cost(expired.summary["run_id"], project)
    [unread] = _unread(report)
    assert (unread["calls"], unread["estimated"], unread["tier"]) == (2, 0, "batch")
    assert unread["output_tokens"] > 0 and unread["cost_usd"] > 0  # OpenAI reports its usage
    assert report["cost_usd"] == pytest.approx(unread["cost_usd"])
    assert report["batch_saved_usd"] == 0  # paid for and never used: nothing saved
    assert expired.summary["cost_usd"] == pytest.approx(unread["cost_usd"])
    # `agac retry` sends the 4 again: 6 answers billed, 6 in the ledger.
    assert retry(project).exit_code == 75
    emulator.advance(120)
    assert run(project).exit_code == 0
    assert emulator.stats()["answered"] == 6 and _ledgered(project) == 6


@pytest.mark.parametrize(("provider", "estimated"), [("openai", 0), ("groq", 4)])
def test_fresh_over_ended_batches_ledgers_what_they_billed_in_the_run_that_sent_them(
    provider: str, estimated: int, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, {"a": 2, "b": 2}, summarize=False)
    first = run(project)
    assert first.exit_code == 75
    emulator.advance(120)  # both batches ended at the provider: 4 answers billed

    fresh = run(project, fresh=True)

    assert fresh.exit_code == 75
    abandoned = [n for n in fresh.notes if n.startswith("abandoned batch")]
    assert len(abandoned) == 2 and all("billed 2 answers" in n for n in abandoned), fresh.notes
    assert all(first.summary["run_id"] in n for n in abandoned)
    [unread] = _unread(api.cost(first.summary["run_id"], project))
    assert (unread["calls"], unread["estimated"]) == (4, estimated) and unread["cost_usd"] > 0
    assert _ledgered(project) == emulator.stats()["answered"] == 4
    # Not read, not cancelled (they had ended): nothing of them is asked again.
    assert emulator.stats()["requests"][provider].get("batch.cancel", 0) == 0
    assert emulator.stats()["requests"][provider].get("file.download", 0) == 0
    emulator.advance(120)
    assert run(project).exit_code == 0
    assert _ledgered(project) == emulator.stats()["answered"] == 8
