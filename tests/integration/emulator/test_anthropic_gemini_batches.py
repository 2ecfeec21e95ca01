"""Anthropic Message Batches and Gemini batch jobs through their official SDKs:
create, poll with emulator time, read results (Anthropic's absolute ``results_url``,
Gemini's inlined responses and responses file), list, cancel, delete."""

from __future__ import annotations

import io
import json
from typing import Any

import anthropic
import pytest
from emulator_support import BATCH_SECONDS
from google import genai
from google.genai import errors as genai_errors

from agac.emulator.testing import RunningEmulator

SCHEMA = {"type": "object", "properties": {"label": {"enum": ["a", "b"]}}, "required": ["label"]}


def claude_requests(n: int) -> list[dict[str, Any]]:
    return [
        {
            "custom_id": f"rec-{i}",
            "params": {
                "model": "claude-emulated",
                "max_tokens": 200,
                "messages": [{"role": "user", "content": f"Label {i}"}],
                "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
            },
        }
        for i in range(n)
    ]


def test_anthropic_batch_full_cycle(emu: RunningEmulator, claude: anthropic.Anthropic) -> None:
    batch = claude.messages.batches.create(requests=claude_requests(6))  # type: ignore[arg-type]
    assert batch.id.startswith("msgbatch_") and batch.processing_status == "in_progress"
    assert batch.results_url is None
    emu.advance(BATCH_SECONDS * 0.9)
    running = claude.messages.batches.retrieve(batch.id)
    assert running.processing_status == "in_progress"
    assert running.request_counts.processing == 6 and running.request_counts.succeeded == 0
    emu.advance(BATCH_SECONDS * 0.1)
    ended = claude.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.ended_at is not None
    assert ended.request_counts.succeeded == 6 and ended.request_counts.processing == 0
    assert ended.results_url == f"{emu.url}/v1/messages/batches/{batch.id}/results"
    results = list(claude.messages.batches.results(batch.id))
    assert sorted(r.custom_id for r in results) == [f"rec-{i}" for i in range(6)]
    for r in results:
        assert r.result.type == "succeeded"
        assert r.result.message.usage.service_tier == "batch"
        assert json.loads(r.result.message.content[0].text)["label"] in ("a", "b")  # type: ignore[union-attr]
    listed = claude.messages.batches.list(limit=10)
    assert [b.id for b in listed.data] == [batch.id]
    assert claude.messages.batches.delete(batch.id).type == "message_batch_deleted"


def test_anthropic_cancel_while_running_ends_with_a_result_per_request(
    emu: RunningEmulator, claude: anthropic.Anthropic
) -> None:
    batch = claude.messages.batches.create(requests=claude_requests(4))  # type: ignore[arg-type]
    emu.advance(BATCH_SECONDS / 2)
    canceling = claude.messages.batches.cancel(batch.id)
    assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at
    emu.advance(BATCH_SECONDS)
    ended = claude.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended"
    assert ended.request_counts.succeeded == 2 and ended.request_counts.canceled == 2
    kinds = sorted(r.result.type for r in claude.messages.batches.results(batch.id))
    assert kinds == ["canceled", "canceled", "succeeded", "succeeded"]


def test_anthropic_rejects_bad_custom_id(claude: anthropic.Anthropic) -> None:
    bad = claude_requests(1)
    bad[0]["custom_id"] = "has space"
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.batches.create(requests=bad)  # type: ignore[arg-type]
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


def gemini_inline(n: int) -> list[dict[str, Any]]:
    return [
        {
            "contents": [{"role": "user", "parts": [{"text": f"Label {i}"}]}],
            "metadata": {"key": f"k{i}"},
            "config": {
                "response_mime_type": "application/json",
                "response_json_schema": SCHEMA,
                "system_instruction": "Be brief.",
            },
        }
        for i in range(n)
    ]


def test_gemini_inline_batch_full_cycle(emu: RunningEmulator, gem: genai.Client) -> None:
    job = gem.batches.create(
        model="gemini-2.5-flash",
        src=gemini_inline(5),  # type: ignore[arg-type]
        config={"display_name": "shard-reviews"},
    )
    assert job.name and job.name.startswith("batches/")
    assert job.state == "JOB_STATE_PENDING" and job.display_name == "shard-reviews"
    emu.advance(BATCH_SECONDS / 2)
    assert gem.batches.get(name=job.name).state == "JOB_STATE_RUNNING"
    with pytest.raises(ValueError):
        gem.batches.get(name=job.name.removeprefix("batches/"))  # the SDK wants the full name
    emu.advance(BATCH_SECONDS / 2)
    done = gem.batches.get(name=job.name)
    assert done.state == "JOB_STATE_SUCCEEDED" and done.done
    assert done.dest and done.dest.inlined_responses
    got = {r.metadata["key"]: r for r in done.dest.inlined_responses}  # type: ignore[index]
    assert sorted(got) == [f"k{i}" for i in range(5)]
    for r in got.values():
        assert r.response and json.loads(r.response.text or "")["label"] in ("a", "b")
    names = [j.name for j in gem.batches.list(config={"page_size": 10})]
    assert names == [job.name]
    gem.batches.delete(name=job.name)
    with pytest.raises(genai_errors.ClientError) as caught:
        gem.batches.get(name=job.name)
    assert caught.value.code == 404 and caught.value.status == "NOT_FOUND"


def test_gemini_file_batch_full_cycle(emu: RunningEmulator, gem: genai.Client) -> None:
    lines = "".join(
        json.dumps(
            {
                "key": f"f{i}",
                "request": {
                    "contents": [{"role": "user", "parts": [{"text": f"Label {i}"}]}],
                    "generationConfig": {
                        "responseMimeType": "application/json",
                        "responseJsonSchema": SCHEMA,
                    },
                },
            }
        )
        + "\n"
        for i in range(4)
    )
    uploaded = gem.files.upload(
        file=io.BytesIO(lines.encode()),
        config={"mime_type": "application/jsonl", "display_name": "batch-input"},
    )
    assert uploaded.name and uploaded.name.startswith("files/")
    assert uploaded.size_bytes == len(lines.encode())
    job = gem.batches.create(model="gemini-2.5-flash", src=uploaded.name)
    emu.advance_batch(job.name or "")
    done = gem.batches.get(name=job.name or "")
    assert done.state == "JOB_STATE_SUCCEEDED" and done.dest and done.dest.file_name
    content = gem.files.download(file=done.dest.file_name).decode()
    rows = [json.loads(x) for x in content.splitlines() if x]
    assert sorted(r["key"] for r in rows) == ["f0", "f1", "f2", "f3"]
    for row in rows:
        text = row["response"]["candidates"][0]["content"]["parts"][0]["text"]
        assert json.loads(text)["label"] in ("a", "b")


def test_gemini_cancel(emu: RunningEmulator, gem: genai.Client) -> None:
    job = gem.batches.create(model="gemini-2.5-flash", src=gemini_inline(2))  # type: ignore[arg-type]
    gem.batches.cancel(name=job.name or "")
    emu.advance(BATCH_SECONDS)
    done = gem.batches.get(name=job.name or "")
    assert done.state == "JOB_STATE_CANCELLED" and done.dest is None
