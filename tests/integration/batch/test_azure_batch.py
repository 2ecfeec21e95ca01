"""Azure OpenAI batches through ``agac run`` (docs/providers.md, Azure OpenAI): Azure's
batch rules with the engine — a batch Azure never expires ends at the action's
``batch_deadline`` (agac cancels it, then B7), and a Global-Batch run of 10,000 records
over two files meets one enqueued-token quota refusal and one pending file and still
answers every record exactly once. Against the emulator, through the openai SDK's Azure
client (batch and file calls always take the SDK)."""

from __future__ import annotations

from pathlib import Path

from batch_support import counts, creates, make, ops, rows, run

from agac.emulator.testing import RunningEmulator
from agac.store.repository import Store
from agac.testing import ManualClock

MODEL = "azure/gpt-4o-mini-batch"
ONE_ATTEMPT = "{max_attempts: 1, backoff: {initial: 10ms, max: 20ms}}"


def test_azure_batch_never_expires_so_agac_cancels_it_at_the_batch_deadline(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, MODEL, retry=ONE_ATTEMPT, defaults="batch_deadline: 700ms", summarize=False)
    clock = ManualClock()
    st = Store(f"sqlite:///{project}/.agac/agac.db", clock=clock)
    try:
        assert run(project, store=st).exit_code == 75
        # Azure's batches carry no expiry of their own: they run until they end or are
        # cancelled. Past the action's batch_deadline they are still running.
        clock.advance(0.75)
        second = run(project, store=st)
    finally:
        st.close()

    assert second.exit_code == 1 and second.summary["state"] == "failed"
    assert counts(second)["reasons"] == {"batch_deadline": 5}
    assert ops(emulator.stats(), "azure")["batch.cancel"] == 2
    assert all(r["status"] == "failed" for r in rows(project).values())


def test_azure_global_batch_10000_records_two_files_quota_refusal_pending_file(
    emulator: RunningEmulator, project: Path
) -> None:
    keys = make(project, MODEL, {"a": 5000, "b": 5000}, summarize=False)
    emulator.add_fault(
        {
            "provider": "azure",
            "op": "batch.create",
            "nth": 1,
            "times": 1,
            "fault": {"http": 429, "code": "token_limit_exceeded", "retry_after": 1},
        },
        {
            "provider": "azure",
            "op": "file.upload",
            "nth": 2,
            "times": 1,
            "fault": {"file_pending": 2},
        },
    )

    first = run(project)
    assert first.exit_code == 75, first.notes
    assert counts(first)["batches_out"] == 2
    emulator.advance(3600)
    second = run(project)

    assert second.exit_code == 0, second.notes
    assert counts(second)["answered"] == 10_000
    answered = rows(project)
    assert sorted(answered) == sorted(k for file in keys.values() for k in file)
    assert {r["status"] for r in answered.values()} == {"answered"}
    stats = emulator.stats()
    assert stats["duplicate_answers"] == 0
    # The refused create was made again with the file already uploaded: two files, and
    # three creates; the pending file was looked at until processed.
    assert ops(stats, "azure")["file.upload"] == 2
    assert creates(stats, "azure") == 3
    assert ops(stats, "azure")["file.get"] >= 3
