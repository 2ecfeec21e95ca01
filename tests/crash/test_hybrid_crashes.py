"""B13 crash tests: ``agac run --wait`` killed with SIGKILL while a hybrid batch action
switches live — right after the switch is recorded, right after a batch was cancelled
(before the store knew), and between two live calls. The run continued afterwards loses
nothing: every record is answered once, none is sent live twice, and each batch is
cancelled at the provider once."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from crash_support import agac

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """
name: hy
input: {path: data/, id_field: id}
deadline: 10m
actions:
  - name: classify
    model: MODEL
    run_mode: batch
    poll_interval: 1h
    hybrid: {live_after: 30s}
    max_concurrency: 1
    max_tokens: 256
    retry: {max_attempts: 1}
    prompt: "Classify: {{ source.text }}"
"""
KEYS = [f"f{i}r{j}" for i in range(2) for j in range(3)]


def _live_calls(emu: RunningEmulator) -> dict[str, int]:
    out = dict.fromkeys(KEYS, 0)
    for r in emu.requests():
        if r["op"] == "chat":
            body = json.dumps(r["body"])
            for key in KEYS:
                out[key] += f'Classify: text {key}"' in body
    return out


def _bring_live_at_forward(root: Path, seconds: float) -> None:
    """Move the run's ``live_at`` (fixed at admission, 30 s after it) to ``seconds`` from
    now, as if the rest of the 30 s had passed: the next ``--wait`` still waits for it by
    itself (the poll interval is an hour) but not for half a minute."""
    with sqlite3.connect(root / ".agac" / "agac.db") as db:
        changed = db.execute(
            "UPDATE runs SET options = json_set(options, '$.live_at.classify', ?)"
            " WHERE json_extract(options, '$.live_at.classify') IS NOT NULL",
            (time.time() + seconds,),
        ).rowcount
    assert changed == 1


def _end_cancels(emu: RunningEmulator) -> None:
    """The cancels take effect: batches being cancelled end (the others would run an hour)."""
    for b in emu.stats()["batches"]:
        if b["status"] in ("cancelling", "canceling"):
            emu.advance_batch(b["id"])


@pytest.mark.parametrize(
    ("model", "point"),
    [
        ("openai/gpt-4o-mini", "hybrid_switched:1"),
        ("openai/gpt-4o-mini", "hybrid_cancelled:1"),
        ("anthropic/claude-haiku-4-5", "hybrid_cancelled:2"),
        ("openai/gpt-4o-mini", "hybrid_live:2"),
    ],
)
def test_b13_sigkill_during_switch(tmp_path: Path, model: str, point: str) -> None:
    rows = {
        f"data/f{i}.jsonl": [{"id": f"f{i}r{j}", "text": f"text f{i}r{j}"} for j in range(3)]
        for i in range(2)
    }
    write_project(tmp_path, WF.replace("MODEL", model), workflow_file="hy.yml", data=rows)
    with RunningEmulator(batch_seconds=3600) as emu:
        emu.hold_clock()  # the batches never progress by themselves, however slow the machine
        env = emu.env()
        # the first invocation submits both batches and returns (nothing can end yet) ...
        submitted = agac(tmp_path, env, "run", "hy")
        assert submitted.returncode == 75, submitted.stderr
        assert emu.stats()["requests"][model.split("/")[0]]["batch.create"] == 2
        _bring_live_at_forward(tmp_path, 2.0)
        # ... the second waits for live_after by itself (poll_interval is 1 h), switches,
        # and is killed at the point under test
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": point}, "run", "hy", "--wait")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr

        again = agac(tmp_path, env, "run", "hy", "--json")
        # live answers in: the run ends though its batches are still cancelling
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["actions"]["classify"]["answered"] == 6
        _end_cancels(emu)
        done = agac(tmp_path, env, "run", "hy", "--json")

        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["state"] == "succeeded"
        assert summary["actions"]["classify"]["answered"] == 6
        exported = agac(tmp_path, env, "export", "hy", "--action", "classify").stdout
        results = [json.loads(line) for line in exported.splitlines()]
        assert sorted(r["key"] for r in results) == KEYS  # one answer per record
        assert {r["status"] for r in results} == {"answered"}
        assert _live_calls(emu) == dict.fromkeys(KEYS, 1)
        provider = model.split("/")[0]
        requests = emu.stats()["requests"][provider]
        assert requests["batch.create"] == 2 and requests["batch.cancel"] == 2
        switched_run = json.loads(again.stdout)["run_id"]  # the run that went live
        events = json.loads(agac(tmp_path, env, "events", switched_run, "--json").stdout)
        assert [e["kind"] for e in events].count("hybrid_switched") == 1
