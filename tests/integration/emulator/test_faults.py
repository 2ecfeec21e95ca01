"""Every fault kind of issue 3, observed through the official SDKs: status codes,
headers and error bodies in each provider's own format, dropped connections, delays,
rate limits, rule matching and counting, batch ends, lost records, raw statuses, stuck
cancellations and misbehaving answers."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import anthropic
import groq
import jsonschema
import ollama
import openai
import pytest
from emulator_support import BATCH_SECONDS
from google import genai
from google.genai import errors as genai_errors

from agac.emulator.testing import RunningEmulator

USER = [{"role": "user", "content": "hello"}]
SCHEMA = {"type": "object", "properties": {"label": {"enum": ["a", "b"]}}, "required": ["label"]}


def chat(client: openai.OpenAI | groq.Groq, model: str = "gpt-4o-mini", **extra: Any) -> Any:
    return client.chat.completions.create(model=model, messages=USER, **extra)  # type: ignore[arg-type]


def rule(provider: str, op: str, fault: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"provider": provider, "op": op, "fault": fault, **more}


def openai_batch(client: openai.OpenAI, n: int, **metadata: str) -> Any:
    lines = "".join(
        json.dumps(
            {
                "custom_id": f"r{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": "gpt-4o-mini",
                    "messages": [{"role": "user", "content": f"q{i}"}],
                },
            }
        )
        + "\n"
        for i in range(n)
    )
    upload = client.files.create(file=("in.jsonl", io.BytesIO(lines.encode())), purpose="batch")
    return client.batches.create(
        input_file_id=upload.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata=metadata or None,
    )


def file_lines(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if not file_id:
        return []
    return [json.loads(x) for x in client.files.content(file_id).text.splitlines() if x]


# -- HTTP errors in each provider's format ---------------------------------------------


def test_openai_429_with_retry_after_headers(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    emu.add_fault(rule("openai", "chat", {"http": 429, "retry_after": 7}))
    with pytest.raises(openai.RateLimitError) as caught:
        chat(oai)
    err = caught.value
    assert err.response.headers["retry-after"] == "7"
    assert err.response.headers["retry-after-ms"] == "7000"
    assert err.code == "rate_limit_exceeded"


def test_openai_insufficient_quota(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    emu.add_fault(rule("openai", "chat", {"http": 429, "code": "insufficient_quota"}))
    with pytest.raises(openai.RateLimitError) as caught:
        chat(oai)
    assert caught.value.code == "insufficient_quota" and caught.value.type == "insufficient_quota"
    assert "retry-after" not in caught.value.response.headers


def test_openai_5xx_and_400(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    emu.add_fault(
        rule("openai", "chat", {"http": 503}, times=1),
        rule("openai", "chat", {"http": 400, "code": "invalid_value"}, times=1),
    )
    with pytest.raises(openai.InternalServerError):
        chat(oai)
    with pytest.raises(openai.BadRequestError) as caught:
        chat(oai)
    assert caught.value.code == "invalid_value"
    assert chat(oai).choices[0].message.content


def test_groq_429_has_retry_after_seconds_only(emu: RunningEmulator, gq: groq.Groq) -> None:
    emu.add_fault(rule("groq", "chat", {"http": 429, "retry_after": 3}))
    with pytest.raises(groq.RateLimitError) as caught:
        chat(gq, model="llama-3.1-8b")
    assert caught.value.response.headers["retry-after"] == "3"
    assert "retry-after-ms" not in caught.value.response.headers


def test_anthropic_529_overloaded(emu: RunningEmulator, claude: anthropic.Anthropic) -> None:
    emu.add_fault(rule("anthropic", "chat", {"http": 529, "retry_after": 2}))
    with pytest.raises(anthropic.OverloadedError) as caught:
        claude.messages.create(model="claude-emulated", max_tokens=10, messages=USER)  # type: ignore[arg-type]
    body: Any = caught.value.body
    assert body["type"] == "error" and body["error"]["type"] == "overloaded_error"
    assert caught.value.response.headers["retry-after-ms"] == "2000"
    assert caught.value.response.headers["retry-after"] == "2"


def test_anthropic_spend_cap_429_has_no_retry_after(
    emu: RunningEmulator, claude: anthropic.Anthropic
) -> None:
    emu.add_fault(rule("anthropic", "chat", {"http": 429}))
    with pytest.raises(anthropic.RateLimitError) as caught:
        claude.messages.create(model="claude-emulated", max_tokens=10, messages=USER)  # type: ignore[arg-type]
    assert "retry-after" not in caught.value.response.headers
    assert caught.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]


def test_gemini_429_retry_info_versus_quota_failure(
    emu: RunningEmulator, gem: genai.Client
) -> None:
    emu.add_fault(
        rule("gemini", "chat", {"http": 429, "retry_after": 30}, times=1),
        rule("gemini", "chat", {"http": 429}, times=1),
    )
    with pytest.raises(genai_errors.ClientError) as waitable:
        gem.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert waitable.value.code == 429 and waitable.value.status == "RESOURCE_EXHAUSTED"
    details = waitable.value.details["error"]["details"]
    kinds = {d["@type"].rsplit(".", 1)[-1]: d for d in details}
    assert kinds["RetryInfo"]["retryDelay"] == "30s" and "QuotaFailure" in kinds
    with pytest.raises(genai_errors.ClientError) as quota:
        gem.models.generate_content(model="gemini-2.5-flash", contents="hi")
    kinds = {d["@type"].rsplit(".", 1)[-1] for d in quota.value.details["error"]["details"]}
    assert kinds == {"QuotaFailure"}


def test_gemini_503_is_server_error(emu: RunningEmulator, gem: genai.Client) -> None:
    emu.add_fault(rule("gemini", "chat", {"http": 503}))
    with pytest.raises(genai_errors.ServerError) as caught:
        gem.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert caught.value.status == "UNAVAILABLE"


def test_ollama_503_busy(emu: RunningEmulator, oll: ollama.Client) -> None:
    emu.add_fault(rule("ollama", "chat", {"http": 503}))
    with pytest.raises(ollama.ResponseError) as caught:
        oll.chat(model="llama3.2", messages=USER)
    assert caught.value.status_code == 503 and "server busy" in caught.value.error


# -- connection, delay, rate limit ------------------------------------------------------


def test_drop_connection(
    emu: RunningEmulator, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    emu.add_fault(rule("*", "chat", {"drop_connection": True}, times=2))
    with pytest.raises(openai.APIConnectionError):
        chat(oai)
    with pytest.raises(anthropic.APIConnectionError):
        claude.messages.create(model="claude-emulated", max_tokens=10, messages=USER)  # type: ignore[arg-type]
    assert chat(oai).choices[0].message.content
    assert emu.stats()["requests"]["openai"]["chat"] == 2


def test_delay_and_client_timeout(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    emu.add_fault(rule("openai", "chat", {"delay_ms": 300}, times=2))
    started = time.perf_counter()
    chat(oai)
    assert time.perf_counter() - started >= 0.3
    with pytest.raises(openai.APITimeoutError):
        oai.with_options(timeout=0.1).chat.completions.create(model="m", messages=USER)  # type: ignore[arg-type]


def test_rate_limit_rpm_uses_emulator_time(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    emu.add_fault(rule("openai", "chat", {"rate_limit": {"rpm": 2}}))
    chat(oai)
    chat(oai)
    with pytest.raises(openai.RateLimitError) as caught:
        chat(oai)
    assert int(caught.value.response.headers["retry-after"]) in range(1, 61)
    emu.advance(61)
    assert chat(oai).choices[0].message.content


def test_nth_times_and_match(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    emu.add_fault(
        rule("openai", "chat", {"http": 500}, nth=2),
        rule("openai", "chat", {"http": 502}, match={"model": "other"}, times=2),
    )
    chat(oai)
    with pytest.raises(openai.InternalServerError):
        chat(oai)  # the 2nd match of the nth rule
    chat(oai)  # nth fires once only
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            chat(oai, model="other")
    chat(oai, model="other")  # times=2 spent
    counters = {(r.matched, r.fired) for r in emu.state.faults.rules}
    assert counters == {(6, 1), (3, 2)}


def test_invalid_rules_are_rejected(emu: RunningEmulator) -> None:
    with pytest.raises(ValueError, match="anthropic"):
        emu.add_fault(rule("anthropic", "batch.create", {"batch_end": "failed"}))
    with pytest.raises(ValueError, match="op must be"):
        emu.add_fault(rule("openai", "nope", {"http": 500}))
    with pytest.raises(ValueError, match="answer"):
        emu.add_fault(rule("openai", "chat", {"answer": "gibberish"}))
    assert emu.state.faults.rules == []


# -- answers ----------------------------------------------------------------------------


def _schema_format() -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "l", "schema": SCHEMA}}


def test_answer_faults_on_openai_chat(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    for kind in ("truncated", "invalid_json", "schema_violation", "refusal"):
        emu.add_fault(rule("openai", "chat", {"answer": kind}, times=1))
    truncated = chat(oai, response_format=_schema_format())
    assert truncated.choices[0].finish_reason == "length"
    invalid = chat(oai, response_format=_schema_format())
    with pytest.raises(ValueError):
        json.loads(invalid.choices[0].message.content)
    violating = chat(oai, response_format=_schema_format())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(violating.choices[0].message.content), SCHEMA)
    refusal = chat(oai, response_format=_schema_format())
    assert refusal.choices[0].message.content is None and refusal.choices[0].message.refusal
    good = chat(oai, response_format=_schema_format())
    jsonschema.validate(json.loads(good.choices[0].message.content), SCHEMA)


def test_answer_faults_on_anthropic_gemini_ollama(
    emu: RunningEmulator, claude: anthropic.Anthropic, gem: genai.Client, oll: ollama.Client
) -> None:
    emu.add_fault(
        rule("anthropic", "chat", {"answer": "refusal"}),
        rule("gemini", "chat", {"answer": "refusal"}, times=1),
        rule("gemini", "chat", {"answer": "truncated"}, times=1),
        rule("ollama", "chat", {"answer": "invalid_json"}),
    )
    refused = claude.messages.create(model="claude-emulated", max_tokens=50, messages=USER)  # type: ignore[arg-type]
    assert refused.stop_reason == "refusal"
    blocked = gem.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert blocked.candidates and blocked.candidates[0].finish_reason == "SAFETY"
    cut = gem.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert cut.candidates and cut.candidates[0].finish_reason == "MAX_TOKENS"
    broken = oll.chat(model="llama3.2", messages=USER, format=SCHEMA)
    with pytest.raises(ValueError):
        json.loads(broken.message.content or "")


# -- batch faults -----------------------------------------------------------------------


def test_batch_create_refused_and_metadata_match(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    emu.add_fault(
        rule(
            "openai",
            "batch.create",
            {"http": 429, "code": "insufficient_quota"},
            match={"metadata": {"shard": "b"}},
        )
    )
    openai_batch(oai, 1, shard="a")
    with pytest.raises(openai.RateLimitError) as caught:
        openai_batch(oai, 1, shard="b")
    assert caught.value.code == "insufficient_quota"
    assert len(emu.stats()["batches"]) == 1


@pytest.mark.parametrize("end", ["failed", "expired", "cancelled"])
def test_openai_batch_end(emu: RunningEmulator, oai: openai.OpenAI, end: str) -> None:
    emu.add_fault(rule("openai", "batch.create", {"batch_end": end, "answered": 2}))
    batch = openai_batch(oai, 5)
    emu.advance(BATCH_SECONDS)
    done = oai.batches.retrieve(batch.id)
    assert done.status == end
    assert len(file_lines(oai, done.output_file_id)) == 2
    errors = file_lines(oai, done.error_file_id)
    if end == "failed":
        assert done.errors and done.errors.data and not errors
    else:
        assert {e["error"]["code"] for e in errors} == {f"batch_{end}"} and len(errors) == 3
    assert emu.stats()["answered"] == 2


@pytest.mark.parametrize("end", ["expired", "cancelled"])
def test_anthropic_batch_end(emu: RunningEmulator, claude: anthropic.Anthropic, end: str) -> None:
    emu.add_fault(rule("anthropic", "batch.create", {"batch_end": end, "answered": 1}))
    requests = [
        {
            "custom_id": f"c{i}",
            "params": {"model": "claude-emulated", "max_tokens": 20, "messages": USER},
        }
        for i in range(3)
    ]
    batch = claude.messages.batches.create(requests=requests)  # type: ignore[arg-type]
    emu.advance(BATCH_SECONDS)
    assert claude.messages.batches.retrieve(batch.id).processing_status == "ended"
    kinds = sorted(r.result.type for r in claude.messages.batches.results(batch.id))
    other = "expired" if end == "expired" else "canceled"
    assert kinds == sorted(["succeeded", other, other])


def test_gemini_batch_end_expired_and_failed(emu: RunningEmulator, gem: genai.Client) -> None:
    emu.add_fault(
        rule("gemini", "batch.create", {"batch_end": "expired"}, times=1),
        rule("gemini", "batch.create", {"batch_end": "failed"}, times=1),
    )
    src = [{"contents": [{"role": "user", "parts": [{"text": "x"}]}]}]
    expired = gem.batches.create(model="gemini-2.5-flash", src=src)  # type: ignore[arg-type]
    failed = gem.batches.create(model="gemini-2.5-flash", src=src)  # type: ignore[arg-type]
    emu.advance(BATCH_SECONDS)
    assert gem.batches.get(name=expired.name or "").state == "JOB_STATE_EXPIRED"
    assert gem.batches.get(name=failed.name or "").state == "JOB_STATE_FAILED"


def test_batch_drop_records_listed_in_stats(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    emu.add_fault(rule("openai", "batch.create", {"batch_drop_records": 2}))
    batch = openai_batch(oai, 6)
    emu.advance(BATCH_SECONDS)
    done = oai.batches.retrieve(batch.id)
    returned = {x["custom_id"] for x in file_lines(oai, done.output_file_id)}
    (entry,) = emu.stats()["batches"]
    assert entry["id"] == batch.id and entry["status"] == "completed" and entry["requests"] == 6
    assert len(entry["dropped"]) == 2 and not returned & set(entry["dropped"])
    assert returned | set(entry["dropped"]) == {f"r{i}" for i in range(6)}


def test_batch_status_raw_string(
    emu: RunningEmulator, oai: openai.OpenAI, gem: genai.Client
) -> None:
    emu.add_fault(
        rule("openai", "batch.get", {"batch_status": "paused_for_review"}, times=1),
        rule("gemini", "batch.get", {"batch_status": "BATCH_STATE_MYSTERY"}, times=1),
    )
    batch = openai_batch(oai, 1)
    assert oai.batches.retrieve(batch.id).status == "paused_for_review"
    assert oai.batches.retrieve(batch.id).status == "validating"
    job = gem.batches.create(
        model="gemini-2.5-flash",
        src=[  # type: ignore[arg-type]
            {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}
        ],
    )
    with pytest.warns(UserWarning, match="BATCH_STATE_MYSTERY"):
        assert gem.batches.get(name=job.name or "").state == "BATCH_STATE_MYSTERY"


def test_batch_stuck_cancelling_until_faults_cleared(
    emu: RunningEmulator, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    emu.add_fault(rule("*", "batch.get", {"batch_stuck_cancelling": True}))
    batch = openai_batch(oai, 2)
    oai.batches.cancel(batch.id)
    claude_batch = claude.messages.batches.create(
        requests=[  # type: ignore[arg-type]
            {
                "custom_id": "c",
                "params": {"model": "claude-emulated", "max_tokens": 5, "messages": USER},
            }
        ]
    )
    claude.messages.batches.cancel(claude_batch.id)
    emu.advance(BATCH_SECONDS * 10)
    assert oai.batches.retrieve(batch.id).status == "cancelling"
    assert claude.messages.batches.retrieve(claude_batch.id).processing_status == "canceling"
    emu.clear_faults()
    assert oai.batches.retrieve(batch.id).status == "cancelled"
    assert claude.messages.batches.retrieve(claude_batch.id).processing_status == "ended"


def test_answer_fault_on_batch_create_hits_every_item(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    emu.add_fault(rule("openai", "batch.create", {"answer": "truncated"}))
    batch = openai_batch(oai, 3)
    emu.advance(BATCH_SECONDS)
    lines = file_lines(oai, oai.batches.retrieve(batch.id).output_file_id)
    assert [x["response"]["body"]["choices"][0]["finish_reason"] for x in lines] == ["length"] * 3


def test_errors_while_polling_and_reading(
    emu: RunningEmulator, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    batch = openai_batch(oai, 1)
    emu.advance(BATCH_SECONDS)
    emu.add_fault(
        rule("openai", "batch.get", {"http": 503}, times=1),
        rule("openai", "file.download", {"http": 500}, times=1),
        rule("anthropic", "batch.results", {"drop_connection": True}, times=1),
    )
    with pytest.raises(openai.InternalServerError):
        oai.batches.retrieve(batch.id)
    done = oai.batches.retrieve(batch.id)
    with pytest.raises(openai.InternalServerError):
        oai.files.content(done.output_file_id or "")
    assert file_lines(oai, done.output_file_id)
    claude_batch = claude.messages.batches.create(
        requests=[  # type: ignore[arg-type]
            {
                "custom_id": "c",
                "params": {"model": "claude-emulated", "max_tokens": 5, "messages": USER},
            }
        ]
    )
    emu.advance(BATCH_SECONDS)
    with pytest.raises(anthropic.APIConnectionError):
        list(claude.messages.batches.results(claude_batch.id))
    assert [r.custom_id for r in claude.messages.batches.results(claude_batch.id)] == ["c"]


def test_item_error_on_anthropic_batch(emu: RunningEmulator, claude: anthropic.Anthropic) -> None:
    emu.add_fault(rule("anthropic", "batch.create", {"http": 500}, match={"custom_id": "bad"}))
    batch = claude.messages.batches.create(
        requests=[  # type: ignore[arg-type]
            {
                "custom_id": cid,
                "params": {"model": "claude-emulated", "max_tokens": 5, "messages": USER},
            }
            for cid in ("good", "bad")
        ]
    )
    emu.advance(BATCH_SECONDS)
    ended = claude.messages.batches.retrieve(batch.id)
    assert ended.request_counts.errored == 1 and ended.request_counts.succeeded == 1
    errored = [r for r in claude.messages.batches.results(batch.id) if r.custom_id == "bad"]
    assert errored[0].result.type == "errored"
    assert errored[0].result.error.error.type == "api_error"  # type: ignore[union-attr]
