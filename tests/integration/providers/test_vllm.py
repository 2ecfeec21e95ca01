"""vLLM / SGLang (local): live calls on both transports against the emulator's vLLM
routes, its stop reasons, its spec (free, no key, batch actions live unless
``batch: run-batch``), and the offline ``vllm run-batch`` executor against a stand-in
command that writes vLLM's output shape (lines out of order, one missing, one error)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from provider_support import SCHEMA

from agac.errors import BatchNotEnded
from agac.providers.base import BatchHandle, BatchStatus, Message, Request, batch_api
from agac.providers.pricing import PriceTable
from agac.providers.registry import provider_spec

STANDIN = Path(__file__).parents[2] / "fixtures" / "runbatch" / "standin.py"
MODEL = "Qwen/Qwen2.5-7B-Instruct"


def _request(custom_id: str | None = None, text: str = "It works.") -> Request:
    return Request(
        provider="vllm",
        model=MODEL,
        messages=(Message("system", "You label reviews."), Message("user", text)),
        max_tokens=200,
        schema=SCHEMA,
        custom_id=custom_id,
        timeout=10.0,
    )


def _chats(emulator: Any) -> list[dict[str, Any]]:
    return [e for e in emulator.requests() if e["op"] == "chat"]


async def test_vllm_live_on_both_transports(make_provider: Any, emulator: Any) -> None:
    """A structured call goes to ``<base>/chat/completions`` with ``max_tokens`` and the
    schema as ``json_schema``; no key is needed (``EMPTY``, as vLLM's examples send)."""
    provider = make_provider("vllm")
    response = await provider.complete(_request())
    assert response.stop_reason == "end"
    assert isinstance(response.parsed, dict)
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    [chat] = _chats(emulator)
    assert chat["provider"] == "vllm"
    assert chat["path"] == "/vllm/v1/chat/completions"
    assert chat["headers"]["authorization"] == "Bearer EMPTY"
    body = chat["body"]
    assert body["model"] == MODEL
    assert body["response_format"]["type"] == "json_schema"
    assert body["max_tokens"] == 200 and "max_completion_tokens" not in body


async def test_vllm_key_when_the_server_wants_one(
    make_provider: Any, emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server started with ``--api-key``: ``VLLM_API_KEY`` goes as the bearer token."""
    monkeypatch.setenv("VLLM_API_KEY", "local-secret")
    await make_provider("vllm").complete(_request())
    [chat] = _chats(emulator)
    assert chat["headers"]["authorization"] == "Bearer local-secret"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("stop", "end"), ("length", "max_tokens"), ("abort", "unexpected"), ("new", "unexpected")],
)
async def test_vllm_stop_reasons(make_provider: Any, emulator: Any, raw: str, reason: str) -> None:
    """``abort`` (the server dropped the request) and an unknown value are never an answer."""
    emulator.add_fault({"provider": "vllm", "op": "chat", "fault": {"reply": {"stop": raw}}})
    response = await make_provider("vllm").complete(_request())
    assert response.stop_reason == reason and response.raw_stop == raw
    assert (response.parsed is not None) == (reason == "end")


def test_vllm_spec_is_local_and_free() -> None:
    """No key, free in the ledger, prompt-ordered, batch actions live by default."""
    spec = provider_spec("vllm")
    assert spec.credential_env == () and spec.local_batch and spec.prefix_order
    assert spec.transports == ("lean", "sdk")
    assert PriceTable().cost(f"vllm/{MODEL}", _usage()) == 0.0
    assert PriceTable().status(f"vllm/{MODEL}") is None  # free, not unpriced


def _usage() -> Any:
    from agac.providers.base import Usage

    return Usage(1000, 1000)


async def test_vllm_batch_runs_live_unless_run_batch_is_chosen(
    make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    """``batch_api`` is None by default (a batch action runs as live calls) and the
    run-batch executor with ``batch: run-batch``."""
    assert batch_api(make_provider("vllm")) is None
    chosen = make_provider("vllm", batch="run-batch", run_batch_dir=str(tmp_path))
    api = batch_api(chosen)
    assert api is not None and api.api is chosen


# -- vllm run-batch ------------------------------------------------------------------------


def _run_batch(make_provider: Any, tmp_path: Path) -> Any:
    return make_provider(
        "vllm",
        batch="run-batch",
        run_batch_command=f"{sys.executable} {STANDIN}",
        run_batch_dir=str(tmp_path / "batches"),
    )


async def _until_done(provider: Any, handle: BatchHandle) -> BatchStatus:
    """Poll until the runner has finished (a failure guard of 60 s, never a timing)."""
    for _ in range(1200):
        status: BatchStatus = await provider.poll_batch(handle)
        if status.state != "running":
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"run-batch still running: {status}")


@pytest.fixture
def standin_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "invocations.log"
    monkeypatch.setenv("RUNBATCH_STANDIN_LOG", str(log))
    return log


def _invocations(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


async def test_vllm_run_batch_reads_back_by_custom_id(
    make_provider: Any, emulator: Any, tmp_path: Path, standin_log: Path
) -> None:
    """The JSONL written, the command run once with ``-i/-o/--model``, the output read back
    by custom_id whatever its order: answers succeed, the error line is that request's
    error (its message kept), the missing request is not returned (B6 in the engine)."""
    provider = _run_batch(make_provider, tmp_path)
    ids = [f"r{i}" for i in range(5)]
    handle = await provider.submit_batch([_request(c, f"review {c}") for c in ids], "agac_k1")
    status = await _until_done(provider, handle)
    assert status.state == "ended" and status.request_count == 5 and status.completed == 4
    results = {r.custom_id: r async for r in provider.batch_results(handle)}
    assert set(results) == {"r0", "r2", "r3", "r4"}  # r1: not returned
    for c in ("r0", "r3", "r4"):
        answer = results[c].response
        assert results[c].type == "succeeded" and answer is not None
        assert answer.parsed == {"sentiment": "pos", "score": 7, "tags": [c]}
        assert answer.service_tier == "batch" and answer.usage.input_tokens == 21
    bad = results["r2"]
    assert bad.type == "errored" and "too long" in str(bad.error)
    [argv] = _invocations(standin_log)
    assert argv[argv.index("--model") + 1] == MODEL
    written = (tmp_path / "batches" / handle.id / "input.jsonl").read_text().splitlines()
    assert [json.loads(line)["custom_id"] for line in written] == ids
    assert (await provider.billed_work(handle)).answered == 4


async def test_vllm_run_batch_never_runs_a_file_twice(
    make_provider: Any, emulator: Any, tmp_path: Path, standin_log: Path
) -> None:
    """Submitting a key again finds its batch (B2 recovery: ``find_batch``) and runs
    nothing; a rerun whose record of the launch was lost starts a runner that sees the
    output and runs nothing either."""
    provider = _run_batch(make_provider, tmp_path)
    handle = await provider.submit_batch([_request("a"), _request("b")], "agac_k2")
    await _until_done(provider, handle)
    assert await provider.find_batch("agac_k2") == handle
    assert await provider.submit_batch([_request("a"), _request("b")], "agac_k2") == handle
    folder = tmp_path / "batches" / handle.id
    (folder / "launched.json").unlink()  # as if agac died right after starting it
    assert await provider.find_batch("agac_k2") is None
    again = await provider.submit_batch([_request("a"), _request("b")], "agac_k2")
    assert again.id == handle.id
    await _until_done(provider, again)
    assert (folder / "exit.json").exists()
    assert len(_invocations(standin_log)) == 1
    assert await provider.find_batch("another") is None


async def test_vllm_run_batch_failed_command_is_a_failed_batch(
    make_provider: Any,
    emulator: Any,
    tmp_path: Path,
    standin_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A command that exits non-zero fails the batch (B7): nothing is read from it."""
    monkeypatch.setenv("RUNBATCH_STANDIN_EXIT", "3")
    provider = _run_batch(make_provider, tmp_path)
    handle = await provider.submit_batch([_request("a")], "agac_k3")
    status = await _until_done(provider, handle)
    assert status.state == "failed" and status.raw_status == "exit 3"
    with pytest.raises(BatchNotEnded):
        [r async for r in provider.batch_results(handle)]
    log = (tmp_path / "batches" / handle.id / "log.txt").read_text()
    assert "out of memory" in log
