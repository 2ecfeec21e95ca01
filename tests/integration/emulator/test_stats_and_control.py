"""The control API: request counters (faulted requests included), billed answers and
duplicate answers, resets, the emulator clock, per-batch advance, and the CLI's exports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anthropic
import openai
import pytest
from click.testing import CliRunner
from google import genai

from agac.cli.emulator import emulator
from agac.emulator.env import exports, variables
from agac.emulator.testing import RunningEmulator

USER = [{"role": "user", "content": "same question"}]


def test_stats_count_requests_answers_and_duplicates(
    emu: RunningEmulator, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    emu.add_fault({"provider": "openai", "op": "chat", "fault": {"http": 500}, "times": 1})
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.create(model="m", messages=USER)  # type: ignore[arg-type]
    oai.chat.completions.create(model="m", messages=USER)  # type: ignore[arg-type]
    oai.chat.completions.create(model="m", messages=USER)  # type: ignore[arg-type]  # paid twice
    oai.chat.completions.create(model="m", messages=USER, seed=1)  # type: ignore[arg-type]
    oai.chat.completions.create(model="other", messages=USER)  # type: ignore[arg-type]
    claude.messages.create(model="claude-emulated", max_tokens=9, messages=USER)  # type: ignore[arg-type]
    stats = emu.stats()
    assert stats["requests"] == {"openai": {"chat": 5}, "anthropic": {"chat": 1}}
    assert stats["answered"] == 5 and stats["duplicate_answers"] == 1
    assert stats["batches"] == []
    emu.reset_stats()
    assert emu.stats() == {
        "requests": {},
        "batches": [],
        "answered": 0,
        "duplicate_answers": 0,
        "searches": {},
    }
    oai.chat.completions.create(model="m", messages=USER)  # type: ignore[arg-type]
    assert emu.stats()["duplicate_answers"] == 0  # billed again, but not since the reset


def test_stats_list_batches_with_native_status(
    emu: RunningEmulator, claude: anthropic.Anthropic, gem: genai.Client
) -> None:
    batch = claude.messages.batches.create(
        requests=[  # type: ignore[arg-type]
            {
                "custom_id": "a",
                "params": {"model": "claude-emulated", "max_tokens": 5, "messages": USER},
            }
        ]
    )
    job = gem.batches.create(
        model="gemini-2.5-flash",
        src=[  # type: ignore[arg-type]
            {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}
        ],
    )
    listed = {b["id"]: b for b in emu.stats()["batches"]}
    assert listed[batch.id]["status"] == "in_progress"
    assert listed[job.name or ""]["status"] == "BATCH_STATE_PENDING"
    emu.advance_batch(batch.id)
    emu.advance_batch(job.name or "")
    stats = emu.stats()
    assert {b["status"] for b in stats["batches"]} == {"ended", "BATCH_STATE_SUCCEEDED"}
    assert stats["answered"] == 2
    assert stats["requests"]["anthropic"] == {"batch.create": 1}
    assert stats["requests"]["gemini"] == {"batch.create": 1}


def test_advance_batch_by_seconds_moves_only_that_batch(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    import io

    upload = oai.files.create(
        file=(
            "in.jsonl",
            io.BytesIO(
                b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", '
                b'"body": {"model": "m", "messages": []}}\n'
            ),
        ),
        purpose="batch",
    )
    first, second = (
        oai.batches.create(
            input_file_id=upload.id, completion_window="24h", endpoint="/v1/chat/completions"
        )
        for _ in range(2)
    )
    emu.advance_batch(first.id, seconds=emu.state.config.batch_seconds / 2)
    assert oai.batches.retrieve(first.id).status == "in_progress"
    assert oai.batches.retrieve(second.id).status == "validating"


def test_held_clock_moves_only_when_advanced(emu: RunningEmulator) -> None:
    held = emu.hold_clock()
    assert held["held"] is True
    again = emu.clock()
    assert again["now"] == held["now"]  # the wall clock went on; emulator time did not
    assert emu.advance(5)["now"] == held["now"] + 5
    emu.reset()  # a reset follows the wall clock again
    assert emu.clock()["held"] is False


def test_batch_seconds_zero_ends_batches_at_once() -> None:
    with RunningEmulator(batch_seconds=0) as fast:
        client = anthropic.Anthropic(base_url=fast.url, api_key="x", max_retries=0)
        batch = client.messages.batches.create(
            requests=[  # type: ignore[arg-type]
                {
                    "custom_id": "a",
                    "params": {"model": "claude-emulated", "max_tokens": 5, "messages": USER},
                }
            ]
        )
        assert client.messages.batches.retrieve(batch.id).processing_status == "ended"
        client.close()


def test_env_exports_point_sdks_at_the_emulator(
    emu: RunningEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in emu.env().items():
        monkeypatch.setenv(name, value)
    client = openai.OpenAI(max_retries=0)
    assert client.chat.completions.create(model="m", messages=USER).choices  # type: ignore[arg-type]
    client.close()
    gemini = genai.Client()
    assert gemini.models.generate_content(model="gemini-2.5-flash", contents="hi").text
    gemini.close()
    assert emu.stats()["requests"] == {"openai": {"chat": 1}, "gemini": {"chat": 1}}


def test_env_values_follow_each_sdk() -> None:
    env = variables(8765)
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:8765/v1"
    assert env["ANTHROPIC_BASE_URL"] == env["GROQ_BASE_URL"] == "http://127.0.0.1:8765"
    assert env["GOOGLE_GEMINI_BASE_URL"] == env["OLLAMA_HOST"] == "http://127.0.0.1:8765"
    for key in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GROQ_API_KEY",
    ):
        assert env[key]
    assert exports(8765).splitlines()[0] == "export OPENAI_BASE_URL=http://127.0.0.1:8765/v1"


def test_cli_env_prints_exports_that_a_shell_can_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # where Vertex's key file goes
    result = CliRunner().invoke(emulator, ["env", "--port", "9911"])
    assert result.exit_code == 0 and result.output == exports(9911)
    shell = subprocess.run(
        ["sh", "-c", f'eval "{result.output}"; echo "$GROQ_BASE_URL"'],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ.get("PATH", "")},
    )
    assert shell.stdout.strip() == "http://127.0.0.1:9911"


def test_cli_serves_without_a_subcommand() -> None:
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (
        "import sys; from agac.cli.emulator import emulator; "
        f"emulator(['--port', '{port}', '--batch-seconds', '0'])"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_emulator/health") as r:
                    assert r.status == 200
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=240)
        assert proc.stderr is not None
        proc.stderr.close()
