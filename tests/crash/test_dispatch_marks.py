"""Every cent is counted (S1 and §8): calls that were sent but whose outcome never
reached the store — the process was SIGKILLed, or a checkpoint failed — are in the ledger.

Real processes, real SIGKILLs, the official OpenAI SDK against the emulator (which counts
every request it receives). Afterwards::

    emulator's count ≤ ledger's calls ≤ emulator's count + the marks' width

Before dispatch marks the ledger missed the calls in flight at the kill (emulator 208,
``agac cost`` 200).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from crash_support import agac

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

pytest.importorskip("openai")

MC = 8
WIDTH = 3 * MC
"""The marks' width per action: its units holding slots that may not have been sent yet,
and the next 2 × max_concurrency covered ahead (engine/outcomes/marks.py)."""

SINGLE = f"""
name: lost
input: {{path: data/, id_field: id}}
defaults: {{model: openai/gpt-4o-mini, max_concurrency: {MC}, max_tokens: 64}}
actions:
  - name: ask
    prompt: "Say {{{{ source.text }}}}"
"""

CHAINED = (
    SINGLE
    + """  - name: again
    dependencies: [ask]
    prompt: "Again: {{ ask.text }}"
"""
)

FANOUT = f"""
name: lost
input: {{path: data/, id_field: id}}
defaults: {{model: openai/gpt-4o-mini, max_concurrency: {MC}, max_tokens: 64}}
actions:
  - name: ask
    prompt: "Say {{{{ source.text }}}} ({{{{ version }}}})"
    fan_out: {{versions: 3}}
  - name: pick
    kind: join
    dependencies: [ask]
    join: ask
"""


def _spawn(root: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agac.cli.main", *args],
        cwd=root,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _chat(emu: RunningEmulator) -> int:
    return int(emu.stats()["requests"].get("openai", {}).get("chat", 0))


def _kill_after(proc: subprocess.Popen[str], emu: RunningEmulator, calls: int) -> None:
    deadline = time.monotonic() + 120
    while _chat(emu) < calls:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGKILL


def _ledger(root: Path, env: dict[str, str], workflow: str = "lost") -> dict[str, Any]:
    done = agac(root, env, "cost", workflow, "--json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _calls(doc: dict[str, Any]) -> int:
    return sum(int(r["calls"]) for r in doc["rows"] if r["kind"] == "llm")


def _unknown(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in doc["rows"] if r["origin"] == "unknown"]


def _project(root: Path, workflow: str, records: int = 300) -> None:
    write_project(
        root,
        workflow,
        workflow_file="lost.yml",
        data={"data/a.jsonl": [{"id": f"r{j:04d}", "text": f"text {j}"} for j in range(records)]},
    )


@pytest.mark.parametrize(
    ("workflow", "actions"), [(SINGLE, 1), (CHAINED, 2)], ids=["one_action", "chained"]
)
def test_s1_dispatch_mark_counts_calls_lost_to_sigkill(
    tmp_path: Path, workflow: str, actions: int
) -> None:
    _project(tmp_path, workflow)
    with RunningEmulator(latency_ms=200) as emu:
        env = emu.env()
        _kill_after(_spawn(tmp_path, env, "run", "lost"), emu, 60)
        lost_at_kill = _chat(emu)

        resumed = agac(tmp_path, env, "run", "lost", "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert "whose outcome is unknown" in resumed.stderr

        ledger = _ledger(tmp_path, env)
        sent = _chat(emu)
        assert sent <= _calls(ledger) <= sent + actions * WIDTH, (sent, ledger)
        unknown = _unknown(ledger)
        assert unknown, ledger  # calls were in flight at the kill
        assert sum(r["calls"] for r in unknown) <= actions * WIDTH
        # the resumed run asked those units again: the same requests' answers priced them
        assert all(r["priced_by_a_later_answer"] == r["calls"] for r in unknown), unknown
        assert lost_at_kill < sent


def test_s1_dispatch_mark_counts_fan_out_items_lost_to_sigkill(tmp_path: Path) -> None:
    _project(tmp_path, FANOUT, records=120)
    with RunningEmulator(latency_ms=200) as emu:
        env = emu.env()
        _kill_after(_spawn(tmp_path, env, "run", "lost"), emu, 60)

        resumed = agac(tmp_path, env, "run", "lost", "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["actions"]["ask"]["answered"] == 360

        ledger = _ledger(tmp_path, env)
        sent = _chat(emu)
        assert sent <= _calls(ledger) <= sent + WIDTH, (sent, ledger)
        assert _unknown(ledger)


@pytest.mark.parametrize("opener", ["cancel", "new", "fresh"])
def test_s1_whoever_opens_the_run_next_counts_lost_calls(tmp_path: Path, opener: str) -> None:
    """Not only a resumed run: `agac cancel`, `--new` and `--fresh` count them too (the
    run's units get outcomes then, which would hide them)."""
    _project(tmp_path, SINGLE)
    with RunningEmulator(latency_ms=200) as emu:
        env = emu.env()
        _kill_after(_spawn(tmp_path, env, "run", "lost"), emu, 40)
        killed_run = json.loads(agac(tmp_path, env, "runs", "list", "--json").stdout)[0]["run_id"]
        sent = _chat(emu)

        if opener == "cancel":
            done = agac(tmp_path, env, "cancel", "lost", "--json")
        else:
            done = agac(tmp_path, env, "run", "lost", f"--{opener}", "--limit", "1", "--json")
        assert done.returncode in (0, 1), done.stderr

        ledger = _ledger(tmp_path, env, killed_run)
        assert sent <= _calls(ledger) <= sent + WIDTH, (sent, ledger)
        assert _unknown(ledger)


def test_s2_calls_of_a_failed_checkpoint_are_counted(tmp_path: Path) -> None:
    """A checkpoint that fails (a real database error) stops the run (S2); the calls whose
    answers that checkpoint held were paid for and are counted by the next run."""
    _project(tmp_path, SINGLE)
    db = tmp_path / ".agac" / "agac.db"
    with RunningEmulator(latency_ms=20) as emu:
        env = emu.env()
        assert agac(tmp_path, env, "store", "upgrade").returncode == 0
        with sqlite3.connect(db) as conn:
            conn.execute(
                "CREATE TRIGGER agac_test_fail BEFORE INSERT ON outcomes "
                "WHEN NEW.unit_key = 'r0150' "
                "BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END"
            )
        failed = agac(tmp_path, env, "run", "lost", "--json")
        assert failed.returncode == 1, failed.stderr
        assert "disk full (test)" in failed.stderr
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TRIGGER agac_test_fail")

        resumed = agac(tmp_path, env, "run", "lost", "--json")
        assert resumed.returncode == 0, resumed.stderr

        ledger = _ledger(tmp_path, env)
        sent = _chat(emu)
        assert sent <= _calls(ledger) <= sent + WIDTH, (sent, ledger)
        assert _unknown(ledger)


def test_s1_unknown_calls_on_their_own_line_in_agac_cost(tmp_path: Path) -> None:
    _project(tmp_path, SINGLE)
    with RunningEmulator(latency_ms=200) as emu:
        env = emu.env()
        _kill_after(_spawn(tmp_path, env, "run", "lost"), emu, 40)
        # `agac cancel` counts them without asking again: they stay at their worst case
        assert agac(tmp_path, env, "cancel", "lost").returncode in (0, 1)
        text = agac(tmp_path, env, "cost", "lost")

    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    unknown = [line for line in lines if "outcome unknown" in line]
    assert len(unknown) == 1, text.stdout  # a row of its own, next to the settled calls'
    assert "at their worst case, 0 priced by a later answer" in unknown[0]
    assert len([line for line in lines if "openai/gpt-4o-mini" in line]) == 2, text.stdout
