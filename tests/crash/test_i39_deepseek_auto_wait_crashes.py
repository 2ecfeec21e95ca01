"""``run_mode: auto`` waiting for DeepSeek's cheaper hours survives SIGKILL: a run killed
right after admission, and one killed while ``agac run --wait`` sleeps until the hours
open, keep the start instant chosen at admission (stored in the run's settings), send
nothing before it, and, once the hours open, send each record exactly once, priced at the
window's rates. The window is set two hours ahead of the machine's clock; the last step
moves an injected clock there (no real waiting for it)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from crash_support import agac

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.store.repository import Store
from agac.tenants import DEFAULT_TENANT
from agac.testing import ManualClock, write_project

WF = """\
name: hours
input: {path: data/, id_field: id}
deadline: 8h
actions:
  - name: ask
    model: deepseek/deepseek-chat
    run_mode: auto
    max_tokens: 64
    timeout: 10s
    prompt: "Answer: {{ source.text }}"
"""
KEYS = [f"q{i}" for i in range(3)]


def _window_ahead(root: Path) -> float:
    """Write the project with off-peak hours opening two whole minutes-aligned hours ahead
    of now and lasting four; when they open (epoch seconds)."""
    now = datetime.now(UTC)
    minute = now.hour * 60 + now.minute
    start = (minute + 120) % 1440
    end = (start + 240) % 1440
    hhmm = f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}"
    agac_yml = (
        "prices:\n"
        "  deepseek/deepseek-chat:\n"
        "    input: 0.27\n"
        "    output: 1.10\n"
        "    windows:\n"
        f'      - {{name: off-peak, utc: "{hhmm}", input: 0.135, output: 0.55}}\n'
    )
    rows = [{"id": k, "text": f"hi {k}"} for k in KEYS]
    write_project(root, WF, agac_yml=agac_yml, data={"data/q.jsonl": rows})
    return now.replace(second=0, microsecond=0).timestamp() + 120 * 60


def _chats(emu: RunningEmulator) -> list[str]:
    return [json.dumps(r["body"]) for r in emu.requests() if r["op"] == "chat"]


def _start_at(root: Path) -> dict[str, float]:
    store = Store(f"sqlite:///{root}/.agac/agac.db")
    try:
        run = store.latest_run("hours", tenant=DEFAULT_TENANT)
        assert run is not None
        return run.settings.start_at
    finally:
        store.close()


def _kill_while_waiting(root: Path, env: dict[str, str]) -> None:
    """``agac run --wait`` until it reports it waits for the cheaper hours, then SIGKILL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agac.cli.main", "run", "hours", "--wait"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    guard = time.monotonic() + 240  # only a hang reaches it
    try:
        while True:
            time.sleep(0.3)
            shown = agac(root, env, "events", "--json")
            if shown.returncode == 0 and "cheaper_hours" in shown.stdout:
                break
            assert proc.poll() is None and time.monotonic() < guard, proc.stderr
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("crash", ["after_admit", "while_waiting"])
def test_i39_deepseek_auto_waits_survives_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash: str
) -> None:
    opens = _window_ahead(tmp_path)
    with RunningEmulator() as emu:
        env = emu.env()
        if crash == "after_admit":
            killed = agac(tmp_path, {**env, "AGAC_CRASH_AT": "after_admit"}, "run", "hours")
            assert killed.returncode == -signal.SIGKILL, killed.stderr
        else:
            admitted = agac(tmp_path, env, "run", "hours")
            assert admitted.returncode == 75, admitted.stderr
            _kill_while_waiting(tmp_path, env)
        assert _start_at(tmp_path) == {"ask": opens}  # the wait is kept
        again = agac(tmp_path, env, "run", "hours", "--json")
        assert again.returncode == 75, again.stderr  # still waiting, the same run
        assert _chats(emu) == []  # nothing sent before the hours open
        shown = agac(tmp_path, env, "status", "hours")
        assert "ask: run_mode auto waits for the cheaper hours, starting" in shown.stdout

        for name, value in env.items():
            monkeypatch.setenv(name, value)
        clock = ManualClock()
        clock.advance(opens - clock.time())
        store = Store(f"sqlite:///{tmp_path}/.agac/agac.db", clock=clock)
        try:
            done = api.run("hours", tmp_path, store=store)
            assert done.exit_code == 0
            assert done.summary["run_id"] == json.loads(again.stdout)["run_id"]
            cost = api.cost(done.summary["run_id"], tmp_path, store=store)["cost_usd"]
        finally:
            store.close()
        chats = _chats(emu)
        assert sorted(k for k in KEYS for c in chats if f"hi {k}" in c) == KEYS  # once each
        assert len(chats) == len(KEYS)
        assert cost > 0
