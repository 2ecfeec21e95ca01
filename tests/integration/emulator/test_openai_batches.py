"""OpenAI and Groq Batch API cycles through their official SDKs: upload, create with
metadata, statuses moving with emulator time (never slept for), results and errors files,
pagination, cancel, and the all-failed and invalid-input ends."""

from __future__ import annotations

import io
import json
from typing import Any

import groq
import openai
import pytest
from emulator_support import BATCH_SECONDS

from agac.emulator.testing import RunningEmulator

SCHEMA = {
    "type": "object",
    "properties": {"label": {"enum": ["a", "b", "c"]}},
    "required": ["label"],
}


def jsonl(n: int, *, prefix: str = "r", model: str = "gpt-4o-mini") -> bytes:
    lines = []
    for i in range(n):
        body: dict[str, Any] = {
            "model": model,
            "max_completion_tokens": 100,
            "messages": [{"role": "user", "content": f"Label item {i}."}],
        }
        if i % 2 == 0:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "l", "schema": SCHEMA},
            }
        lines.append(
            json.dumps(
                {
                    "custom_id": f"{prefix}{i}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": body,
                }
            )
        )
    return ("\n".join(lines) + "\n").encode()


def submit(client: openai.OpenAI | groq.Groq, n: int, **metadata: str) -> Any:
    upload = client.files.create(file=("in.jsonl", io.BytesIO(jsonl(n))), purpose="batch")
    return client.batches.create(
        input_file_id=upload.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata=metadata or None,
    )


def read_lines(client: openai.OpenAI | groq.Groq, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    text = client.files.content(file_id).text
    return [json.loads(line) for line in text.splitlines() if line]


def test_openai_batch_full_cycle(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    batch = submit(oai, 20, shard="reviews.jsonl")
    assert batch.status == "validating" and batch.metadata == {"shard": "reviews.jsonl"}
    assert batch.id.startswith("batch_")
    seen = [oai.batches.retrieve(batch.id).status]
    assert oai.batches.retrieve(batch.id).request_counts.total == 0  # type: ignore[union-attr]
    for _ in range(4):
        emu.advance(BATCH_SECONDS / 4)
        seen.append(oai.batches.retrieve(batch.id).status)
    assert seen == ["validating", "in_progress", "in_progress", "finalizing", "completed"]
    done = oai.batches.retrieve(batch.id)
    assert done.request_counts.total == 20 and done.request_counts.completed == 20  # type: ignore[union-attr]
    assert done.error_file_id is None and done.completed_at
    lines = read_lines(oai, done.output_file_id)
    ids = [line["custom_id"] for line in lines]
    assert sorted(ids) == sorted(f"r{i}" for i in range(20))
    assert ids != [f"r{i}" for i in range(20)], "result order is shuffled"
    for line in lines:
        assert line["id"].startswith("batch_req_") and line["error"] is None
        assert line["response"]["status_code"] == 200
        body = line["response"]["body"]
        if int(line["custom_id"][1:]) % 2 == 0:
            assert json.loads(body["choices"][0]["message"]["content"])["label"] in "abc"
    assert oai.files.retrieve(done.output_file_id or "").purpose == "batch_output"
    assert emu.stats()["answered"] == 20


def test_openai_batch_answers_equal_live_answers(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    batch = submit(oai, 2)
    emu.advance_batch(batch.id)
    lines = read_lines(oai, oai.batches.retrieve(batch.id).output_file_id)
    by_id = {line["custom_id"]: line["response"]["body"] for line in lines}
    live = oai.chat.completions.create(
        model="gpt-4o-mini",
        max_completion_tokens=100,
        messages=[{"role": "user", "content": "Label item 1."}],
    )
    assert by_id["r1"]["choices"][0]["message"]["content"] == live.choices[0].message.content
    assert emu.stats()["duplicate_answers"] == 1


def test_openai_batch_list_paginates_with_after(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    made = [submit(oai, 1, seq=str(i)).id for i in range(5)]
    page = oai.batches.list(limit=2)
    assert [b.id for b in page.data] == made[::-1][:2] and page.has_more
    nxt = oai.batches.list(limit=2, after=page.data[-1].id)
    assert [b.id for b in nxt.data] == made[::-1][2:4]
    assert [b.id for b in oai.batches.list(limit=2)] == made[::-1]  # auto-paging


def test_openai_batch_cancel_keeps_partial_results(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    batch = submit(oai, 10)
    emu.advance(BATCH_SECONDS / 2)  # half way through the running half
    cancelling = oai.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at
    emu.advance(BATCH_SECONDS)
    done = oai.batches.retrieve(batch.id)
    assert done.status == "cancelled" and done.cancelled_at
    out, err = read_lines(oai, done.output_file_id), read_lines(oai, done.error_file_id)
    assert len(out) == 5 and len(err) == 5
    assert {e["error"]["code"] for e in err} == {"batch_cancelled"}
    assert all(e["response"] is None for e in err)
    with pytest.raises(openai.ConflictError):
        oai.batches.cancel(batch.id)


def test_openai_all_failed_batch_is_still_completed(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    emu.add_fault(
        *(
            {
                "provider": "openai",
                "op": "batch.create",
                "match": {"custom_id": f"r{i}"},
                "fault": {"http": 400, "code": "invalid_value"},
            }
            for i in range(3)
        )
    )
    batch = submit(oai, 3)
    emu.advance_batch(batch.id)
    done = oai.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id is None
    assert done.request_counts.failed == 3  # type: ignore[union-attr]
    err = read_lines(oai, done.error_file_id)
    assert {e["response"]["status_code"] for e in err} == {400}
    assert err[0]["response"]["body"]["error"]["code"] == "invalid_value"
    assert emu.stats()["answered"] == 0


def test_openai_invalid_input_fails_with_line_errors(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    content = (
        jsonl(2) + b'{"custom_id": "r0", "method": "POST", "url": "/v1/chat/completions"'
        b', "body": {}}\nnot json\n'
    )
    upload = oai.files.create(file=("in.jsonl", io.BytesIO(content)), purpose="batch")
    batch = oai.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    emu.advance(BATCH_SECONDS / 4)
    failed = oai.batches.retrieve(batch.id)
    assert failed.status == "failed" and failed.errors and failed.errors.data
    assert [e.line for e in failed.errors.data] == [3, 4]
    assert failed.output_file_id is None


def test_openai_create_refuses_unknown_file(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        oai.batches.create(
            input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h"
        )


def test_groq_batch_full_cycle_and_cursor_paging(emu: RunningEmulator, gq: groq.Groq) -> None:
    upload = gq.files.create(
        file=("in.jsonl", io.BytesIO(jsonl(4, model="llama-3.1-8b"))), purpose="batch"
    )
    assert upload.id.startswith("file_01")
    assert gq.files.info(upload.id).bytes == len(jsonl(4, model="llama-3.1-8b"))
    batch = gq.batches.create(
        input_file_id=upload.id,
        endpoint="/v1/chat/completions",
        completion_window="7d",
        metadata={"shard": "a"},
    )
    assert batch.status == "validating" and batch.id.startswith("batch_01")
    emu.advance(BATCH_SECONDS)
    done = gq.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts.completed == 4  # type: ignore[union-attr]
    response = gq.files.content(done.output_file_id or "")
    lines = [json.loads(x) for x in response.text().splitlines() if x]
    assert sorted(x["custom_id"] for x in lines) == ["r0", "r1", "r2", "r3"]
    second = gq.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    first_page = gq.batches.list(extra_query={"limit": 1})
    assert [b.id for b in first_page.data] == [second.id]
    cursor = first_page.paging["next_cursor"]  # type: ignore[attr-defined]
    assert [b.id for b in gq.batches.list(extra_query={"cursor": cursor}).data] == [batch.id]
    cancelled = gq.batches.cancel(second.id)
    assert cancelled.status == "cancelling"
    emu.advance(BATCH_SECONDS)
    assert gq.batches.retrieve(second.id).status == "cancelled"
