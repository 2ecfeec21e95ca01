"""A crash in a run of an action with ``variants:`` (The quality loop: two variants compared):
the process is SIGKILLed once some variant answers are durable (online), or once a
variant's batch is accepted by the provider and not yet recorded (batch). The next run
asks no variant's request twice and pays for each once: each variant's requests are
ordinary units with their own fingerprints."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from crash_support import agac

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """
name: vcrash
input: {path: data/, id_field: id}
defaults: {max_tokens: 64, max_concurrency: 1, retry: {max_attempts: 2}%s}
actions:
  - name: label
    model: openai/gpt-4o-mini
    prompt: "Label {{ source.text }}"
    schema:
      type: object
      properties: {label: {type: string}}
      required: [label]
      additionalProperties: false
    variants:
      - {name: mini}
      - {name: large, model: openai/gpt-4o, prompt: "Label carefully {{ source.text }}"}
"""

ROWS = [{"id": f"r{i}", "text": f"item {i}"} for i in range(3)]


def _calls(root: Path) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for r in api.cost("vcrash", root)["rows"]:
        key = (r["action"], r["origin"])
        out[key] = out.get(key, 0) + r["calls"]
    return out


@pytest.mark.parametrize("point", ["after_checkpoint:1", "after_checkpoint:4"])
def test_i38_variants_a_crash_online_asks_no_variant_twice(tmp_path: Path, point: str) -> None:
    write_project(tmp_path, WF % "", workflow_file="vcrash.yml", data={"data/a.jsonl": ROWS})
    with RunningEmulator() as emu:
        env = emu.env()
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": point}, "run", "vcrash")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr

        done = agac(tmp_path, env, "run", "vcrash", "--json")

        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["actions"]["label"]["answered"] == 3
        assert summary["actions"]["label@large"]["answered"] == 3
        bodies = [json.dumps(e["body"]) for e in emu.requests() if e["op"] == "chat"]
        # Each record asked once of each variant: six requests, none twice.
        assert len(bodies) == len(set(bodies)) == 6
        calls = _calls(tmp_path)
        assert calls[("label", "call")] == 3 and calls[("label@large", "call")] == 3


def test_i38_variants_a_crash_after_a_variants_batch_is_accepted_pays_nothing_twice(
    tmp_path: Path,
) -> None:
    write_project(
        tmp_path,
        WF % ", run_mode: batch",
        workflow_file="vcrash.yml",
        data={"data/a.jsonl": ROWS},
    )
    with RunningEmulator() as emu:
        env = emu.env()
        for n in range(1, 8):
            extra = {"AGAC_CRASH_AT": "after_submit:1"} if n == 1 else {}
            got = agac(tmp_path, {**env, **extra}, "run", "vcrash", "--json")
            if n == 1:
                assert got.returncode == -signal.SIGKILL, got.stderr
                continue
            if got.returncode != 75:
                break
            emu.advance(120)

        assert got.returncode == 0, got.stderr
        summary = json.loads(got.stdout)
        assert summary["actions"]["label"]["answered"] == 3
        assert summary["actions"]["label@large"]["answered"] == 3
        stats = emu.stats()["requests"]["openai"]
        # One batch per variant (two models), each created once; nothing live.
        assert stats["batch.create"] == 2 and stats.get("chat", 0) == 0
        calls = _calls(tmp_path)
        assert calls == {("label", "call"): 3, ("label@large", "call"): 3}
