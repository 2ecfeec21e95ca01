"""Every adapter option of agac.yml takes effect: adapters are built the way a run builds
them (``agac.yml`` -> ``find_project`` -> ``open_providers``), on both online transports,
and the emulator's journal shows what each option changed on the wire."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from provider_support import is_model_call, make_request

from agac import api
from agac.config import find_project
from agac.errors import ProviderError
from agac.providers.factory import open_providers
from agac.testing import write_project

Build = Callable[..., Any]


@pytest.fixture
async def from_yml(tmp_path: Path, emulator: Any, transport: str) -> AsyncIterator[Build]:
    """``from_yml("openai", "structured_output: json_mode")``: the adapter a run would open
    with that ``providers: openai:`` body in agac.yml, on this test's transport."""
    opened: list[Any] = []

    def build(name: str, body: str = "", *, batch: bool = False) -> Any:
        (tmp_path / "agac.yml").write_text(
            f"providers:\n  {name}: {{transport: {transport}{', ' + body if body else ''}}}\n",
            encoding="utf-8",
        )
        config = find_project(tmp_path).config
        adapter = open_providers([name], config, batch={name} if batch else ())[name]
        opened.append(adapter)
        return adapter

    yield build
    for adapter in opened:
        await adapter.aclose()


def _model_bodies(emulator: Any) -> list[dict[str, Any]]:
    return [e["body"] for e in emulator.requests() if is_model_call(e["method"], e["path"])]


@pytest.mark.parametrize(
    ("name", "native", "fallback"),
    [
        ("openai", "json_schema", "json_object"),
        ("groq", "json_schema", "json_object"),
    ],
)
async def test_structured_output_json_mode_openai_style(
    name: str, native: str, fallback: str, emulator: Any, from_yml: Build
) -> None:
    await from_yml(name).complete(make_request(name))
    await from_yml(name, "structured_output: json_mode").complete(make_request(name))
    first, second = _model_bodies(emulator)
    assert first["response_format"]["type"] == native
    assert second["response_format"]["type"] == fallback


async def test_structured_output_json_mode_gemini(emulator: Any, from_yml: Build) -> None:
    await from_yml("gemini").complete(make_request("gemini"))
    await from_yml("gemini", "structured_output: json_mode").complete(make_request("gemini"))
    first, second = (b["generationConfig"] for b in _model_bodies(emulator))
    assert "responseJsonSchema" in first
    assert second["responseMimeType"] == "application/json" and "responseJsonSchema" not in second


async def test_structured_output_json_mode_ollama(emulator: Any, from_yml: Build) -> None:
    await from_yml("ollama").complete(make_request("ollama"))
    await from_yml("ollama", "structured_output: json_mode").complete(make_request("ollama"))
    first, second = _model_bodies(emulator)
    assert isinstance(first["format"], dict) and second["format"] == "json"


async def test_structured_output_tool_anthropic(emulator: Any, from_yml: Build) -> None:
    await from_yml("anthropic").complete(make_request("anthropic"))
    await from_yml("anthropic", "structured_output: tool").complete(make_request("anthropic"))
    first, second = _model_bodies(emulator)
    assert "tools" not in first
    assert second["tool_choice"]["type"] == "tool" and second["tools"]


def _uploads(emulator: Any) -> int:
    return int(emulator.stats()["requests"].get("gemini", {}).get("file.upload", 0))


@pytest.mark.parametrize(
    ("body", "uploaded"),
    [
        ("", 0),  # auto, small: inline
        ("batch_input: file", 1),
        ("inline_max_bytes: 100", 1),  # auto above the (tiny) inline limit: a file
        ("batch_input: inline", 0),
    ],
)
async def test_gemini_batch_input_and_inline_max_bytes(
    body: str, uploaded: int, emulator: Any, from_yml: Build
) -> None:
    provider = from_yml("gemini", body, batch=True)
    requests = [make_request("gemini", f"review {i}", custom_id=f"r{i}") for i in range(3)]
    await provider.submit_batch(requests, "key-input")
    assert _uploads(emulator) == uploaded


@pytest.mark.parametrize("name", ["openai", "groq", "gemini"])
async def test_find_batch_scan_bounds_the_recovery_search(
    name: str, emulator: Any, from_yml: Build
) -> None:
    wide = from_yml(name, batch=True)
    await wide.submit_batch([make_request(name, "a", custom_id="a0")], "key-old")
    await wide.submit_batch([make_request(name, "b", custom_id="b0")], "key-new")
    assert await wide.find_batch("key-old") is not None
    narrow = from_yml(name, "find_batch_scan: 1", batch=True)
    assert await narrow.find_batch("key-new") is not None
    assert await narrow.find_batch("key-old") is None  # beyond the one batch it looks at


async def test_find_batch_skew_widens_the_anthropic_window(emulator: Any, from_yml: Build) -> None:
    submitted = time.time()
    wide = from_yml("anthropic", batch=True)
    handle = await wide.submit_batch([make_request("anthropic", custom_id="a0")], "key-skew")
    later = submitted + 30  # an intent written 30 s after the batch was created (clock skew)
    found = await wide.find_batch(
        "key-skew", created_after=later, created_before=later + 1, request_count=1
    )
    assert found is not None and found.id == handle.id  # within the default 120 s
    tight = from_yml("anthropic", "find_batch_skew: 5", batch=True)
    assert (
        await tight.find_batch(
            "key-skew", created_after=later, created_before=later + 1, request_count=1
        )
        is None
    )


@pytest.mark.parametrize("name", ["openai", "groq", "anthropic", "gemini"])
async def test_timeout_bounds_the_batch_calls(name: str, emulator: Any, from_yml: Build) -> None:
    fine = from_yml(name, batch=True)
    handle = await fine.submit_batch([make_request(name, custom_id="t0")], "key-timeout")
    await fine.poll_batch(handle)  # answers within the default timeout
    # An answer held 30 s against a timeout of 1 s: the wide gap between them is the margin of
    # a loaded machine, where the error's own path can take seconds.
    emulator.add_fault({"provider": name, "op": "batch.get", "fault": {"delay_ms": 30_000}})
    hasty = from_yml(name, "timeout: 1s", batch=True)
    started = time.monotonic()
    with pytest.raises(ProviderError):
        await hasty.poll_batch(handle)
    assert time.monotonic() - started < 20


MOCK_WORKFLOW = """\
name: opts
input: {path: data/}
defaults: {model: mock/m, max_concurrency: 4, retry: {max_attempts: 1}}
actions:
  - name: a
    prompt: "{{ source.text }}"
"""


def test_mock_latency_ms_and_fail_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGAC_MOCK_LATENCY_MS", raising=False)
    monkeypatch.delenv("AGAC_MOCK_FAIL_RATE", raising=False)
    rows = {"data/r.jsonl": [{"text": f"t{i}"} for i in range(4)]}
    slow = tmp_path / "slow"
    write_project(slow, MOCK_WORKFLOW, data=rows, agac_yml="providers: {mock: {latency_ms: 400}}\n")
    started = time.monotonic()
    assert api.run("opts", slow).summary["actions"]["a"]["answered"] == 4
    assert time.monotonic() - started >= 0.4
    failing = tmp_path / "failing"
    write_project(failing, MOCK_WORKFLOW, data=rows, agac_yml="providers: {mock: {fail_rate: 1}}\n")
    summary = api.run("opts", failing).summary["actions"]["a"]
    assert summary["failed"] == 4 and summary["answered"] == 0
