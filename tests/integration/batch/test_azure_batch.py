"""Azure OpenAI batches through ``agac run`` (docs/providers.md, Azure OpenAI): Azure's
batch rules with the engine — a batch Azure never expires ends at the action's
``batch_deadline`` (agac cancels it, then B7), and a Global-Batch run of 10,000 records
over two files meets one enqueued-token quota refusal and one pending file and still
answers every record exactly once. Against the emulator, through the openai SDK's Azure
client (batch and file calls always take the SDK)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import openai
import pytest
from batch_support import WORKFLOW, batches, counts, creates, events, make, ops, rows, run

from agac import api
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


def _billed(emulator: RunningEmulator) -> tuple[int, int, int]:
    """What Azure billed for the run's batches: (answers, prompt tokens, completion
    tokens) summed over every answered line of their output files, read through the
    openai SDK's Azure client."""
    env = emulator.env()
    client = openai.AzureOpenAI(
        azure_endpoint=env["AZURE_OPENAI_ENDPOINT"],
        api_key=env["AZURE_OPENAI_API_KEY"],
        api_version=env["OPENAI_API_VERSION"],
        max_retries=0,
    )
    answers = prompt = completion = 0
    with client:
        for batch in client.batches.list():
            if batch.output_file_id is None:
                continue
            for line in client.files.content(batch.output_file_id).text.splitlines():
                usage = json.loads(line)["response"]["body"]["usage"]
                answers += 1
                prompt += usage["prompt_tokens"]
                completion += usage["completion_tokens"]
    return answers, prompt, completion


def test_azure_global_batch_10000_records_two_files_quota_refusal_pending_file(
    emulator: RunningEmulator, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Global-Batch run of 10,000 records, split into two files by a file size limit set
    small, meets an enqueued-token quota refusal on the first create (waited for and made
    again with the file already uploaded, never a failure) and a second file still
    ``pending`` after its upload (waited for): every record is answered exactly once, as
    the emulator's journal and its batches show, and the ledger holds what Azure billed."""
    from agac.providers.azure import AzureProvider

    spec = AzureProvider.spec
    assert spec.batch is not None
    # About 6 MB of lines (600 bytes each): a 4 MB file holds more than half of them.
    small = dataclasses.replace(spec.batch, max_bytes=4_000_000)
    monkeypatch.setattr(AzureProvider, "spec", dataclasses.replace(spec, batch=small))
    keys = make(project, MODEL, {"a": 10_000}, summarize=False)
    emulator.add_fault(
        {
            "provider": "azure",
            "op": "batch.create",
            "nth": 1,
            "times": 1,
            "fault": {"http": 429, "code": "token_limit_exceeded", "retry_after": 0.01},
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
    sent = sorted((b.file, b.part, b.request_count) for b in batches(project))
    assert [part for _, part, _ in sent] == [0, 1] and sum(n for *_, n in sent) == 10_000
    waits = [e["data"] for e in events(project, kind="waiting")]
    limited = [w["seconds"] for w in waits if w["reason"] == "provider_limit"]
    assert limited == [0.01], waits  # the quota refusal: waited what Azure asked, once
    emulator.advance(3600)
    second = run(project)

    assert second.exit_code == 0, second.notes
    assert counts(second)["answered"] == 10_000
    answered = rows(project)
    assert sorted(answered) == sorted(keys["a.jsonl"])
    assert {r["status"] for r in answered.values()} == {"answered"}
    # The emulator's journal: two files uploaded once each, the refused create made again
    # (three creates), the pending file looked at until processed; two batches holding the
    # 10,000 requests, each answered once.
    stats = emulator.stats()
    assert ops(stats, "azure")["file.upload"] == 2
    assert creates(stats, "azure") == 3
    assert ops(stats, "azure")["file.get"] >= 4
    assert sorted(b["requests"] for b in stats["batches"]) == sorted(n for *_, n in sent)
    assert (stats["answered"], stats["duplicate_answers"]) == (10_000, 0)
    # The ledger is the bill: every answer Azure billed, with its tokens.
    billed = _billed(emulator)
    ledger = api.cost(second.summary["run_id"], project)["rows"]
    assert billed[0] == 10_000 == sum(r["calls"] for r in ledger)
    assert billed[1] == sum(r["input_tokens"] + r["cached_tokens"] for r in ledger)
    assert billed[2] == sum(r["output_tokens"] for r in ledger)


def test_azure_content_filter_in_batch_fails_content_filter_with_categories_in_export_and_session(
    emulator: RunningEmulator, project: Path
) -> None:
    """In a batch, a line whose prompt the filter refused (``status_code: 400``) and a line
    whose answer it filtered each fail their record ``content_filter``, the categories and
    severities in the export row and the session; the other records are answered."""
    make(project, MODEL, {"a": 4}, summarize=False)
    emulator.add_fault(
        {
            "provider": "azure",
            "op": "batch.create",
            "match": {"custom_id": "r0a1"},
            "fault": {"http": 400, "code": "content_filter"},
        },
        {
            "provider": "azure",
            "op": "batch.create",
            "match": {"custom_id": "r1a1"},
            "fault": {
                "reply": {
                    "stop": "content_filter",
                    "filter": {"category": "sexual", "severity": "low"},
                }
            },
        },
    )
    assert run(project).exit_code == 75
    emulator.advance(3600)
    done = run(project)

    assert done.exit_code == 1, done.notes
    assert counts(done)["reasons"] == {"content_filter": 2}
    got = rows(project)
    assert {k: (r["status"], r["reason"]) for k, r in got.items()} == {
        "a0": ("failed", "content_filter"),
        "a1": ("failed", "content_filter"),
        "a2": ("answered", None),
        "a3": ("answered", None),
    }
    assert "refused the prompt (content filter: prompt violence (severity medium))" in str(
        got["a0"]["detail"]
    )
    assert "content filter: answer sexual (severity low)" in str(got["a1"]["detail"])
    for key in ("a0", "a1"):
        session = str(api.record_session(key, project, workflow=WORKFLOW))
        assert str(got[key]["detail"]) in session
