"""Runs on storage points, as real ``agac`` processes on several "machines" (cache folders),
against the provider emulator and moto's S3 server (or a directory): the nightly job, a
SIGKILL, two machines, a paused owner, a failed write (docs/guarantees.md, Storage points; README.md, Contributing)."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from points_support import Point, agac, fresh_copy, spawn, wait_for

from agac.store.points.store import point_folder
from agac.testing import write_project

BATCH_WF = """
name: nightly
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, run_mode: batch}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
"""

ONLINE_WF = """
name: online
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, max_concurrency: 8}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
  - name: summarize
    dependencies: [classify]
    prompt: "Summarize {{ source.text }} labelled {{ classify.text }}"
"""
IN_FLIGHT = 8 + 8


@pytest.fixture(scope="module")
def emulator_server() -> Iterator[Any]:
    testing = pytest.importorskip("agac.emulator.testing")
    with testing.RunningEmulator(batch_seconds=60.0, latency_ms=25) as server:
        yield server


@pytest.fixture
def emulator(emulator_server: Any) -> Iterator[Any]:
    emulator_server.reset()
    emulator_server.hold_clock()  # batches move only when advanced, however slow the machine
    yield emulator_server
    emulator_server.reset()


def _project(
    root: Path,
    point: Point,
    workflow: str,
    n: int,
    *,
    options: str = "",
    files: dict[str, str] | None = None,
) -> Path:
    yml = f"store: {point.url}\n" + (f"store_options: {{{options}}}\n" if options else "")
    write_project(
        root,
        workflow,
        workflow_file="wf.yml",
        agac_yml=yml,
        files=files,
        data={"data/a.jsonl": [{"id": f"r{i:04d}", "text": f"t {i}"} for i in range(n)]},
    )
    return root


def _chat_requests(emulator: Any) -> int:
    return int(emulator.stats()["requests"].get("openai", {}).get("chat", 0))


def test_o3_nightly_job_submits_exits_75_and_a_fresh_machine_collects(
    point: Point, emulator: Any, tmp_path: Path
) -> None:
    pristine = _project(tmp_path / "repo", point, BATCH_WF, 20)
    first = fresh_copy(pristine, tmp_path / "night1" / "proj")
    submitted = agac(
        first,
        "run",
        "nightly",
        "--json",
        point=point,
        cache=tmp_path / "night1" / "cache",
        env=emulator.env(),
    )
    assert submitted.code == 75, submitted
    assert submitted.json()["actions"]["classify"]["batches_out"] == 1
    assert not (first / ".agac" / "agac.db").exists()  # nothing lives only on this disk
    shutil.rmtree(tmp_path / "night1")  # the container is gone: project, cache and all
    emulator.advance(61)

    second = fresh_copy(pristine, tmp_path / "night2" / "proj")
    collected = agac(
        second,
        "run",
        "nightly",
        "--json",
        point=point,
        cache=tmp_path / "night2" / "cache",
        env=emulator.env(),
    )
    assert collected.code == 0, collected
    summary = collected.json()
    assert summary["run_id"] == submitted.json()["run_id"]
    assert summary["state"] == "succeeded"
    assert summary["actions"]["classify"]["answered"] == 20
    stats = emulator.stats()
    assert len(stats["batches"]) == 1  # submitted once, collected by the next machine
    assert stats["duplicate_answers"] == 0


def _local_answered(cache: Path, url: str) -> int:
    """Answered outcomes in a crashed process's working copy (its WAL included), read by
    SQLite as the next process on that disk would."""
    db = point_folder(url, {"XDG_CACHE_HOME": str(cache)}) / "agac.db"
    conn = sqlite3.connect(db)
    try:
        return int(
            conn.execute("SELECT count(*) FROM outcomes WHERE status = 'answered'").fetchone()[0]
        )
    finally:
        conn.close()


def test_o5_sigkill_mid_online_run_restores_on_an_empty_disk_within_the_crash_bound(
    point: Point, emulator: Any, tmp_path: Path
) -> None:
    root = _project(tmp_path / "proj", point, ONLINE_WF, 300)
    crashed = agac(
        root,
        "run",
        "online",
        point=point,
        cache=tmp_path / "m1",
        env={**emulator.env(), "AGAC_CRASH_AT": "after_checkpoint:25"},
    )
    assert crashed.code == -signal.SIGKILL, crashed
    sent_before = _chat_requests(emulator)
    settled_locally = _local_answered(tmp_path / "m1", point.url)
    stored = agac(root, "status", "online", "--json", point=point, cache=tmp_path / "m2")
    assert stored.code == 0, stored
    stored_answered = sum(a["answered"] for a in stored.json()["actions"].values())
    assert 0 < stored_answered <= settled_locally < 600
    shutil.rmtree(tmp_path / "m1")  # the disk is gone

    resumed = agac(
        root, "run", "online", "--json", point=point, cache=tmp_path / "m3", env=emulator.env()
    )
    assert resumed.code == 0, resumed
    summary = resumed.json()
    assert summary["state"] == "succeeded"
    assert all(a["answered"] == 300 and a["pending"] == 0 for a in summary["actions"].values())
    repaid = _chat_requests(emulator) - 600
    # O5: in flight at the kill, plus what had settled since the last stored checkpoint
    assert 0 <= repaid <= IN_FLIGHT + (settled_locally - stored_answered), (
        repaid,
        settled_locally,
        stored_answered,
    )
    assert sent_before <= _chat_requests(emulator)
    calls = sum(a["calls"] for a in summary["actions"].values())
    # S1/O5: the dispatch marks were stored on the point before their calls were sent, so
    # the ledger counts every call the provider received, and at most the marks' width
    # (3 x max_concurrency per action) more
    assert _chat_requests(emulator) <= calls <= _chat_requests(emulator) + 2 * 3 * 8


def test_o2_two_machines_start_the_same_run_one_owns_the_other_exits_75(
    point: Point, emulator: Any, tmp_path: Path
) -> None:
    root = _project(tmp_path / "proj", point, ONLINE_WF, 300)
    owner = spawn(
        root, "run", "online", "--json", point=point, cache=tmp_path / "m1", env=emulator.env()
    )
    try:
        wait_for(lambda: _owner_pid(point) == owner.pid, timeout=240)
        other = agac(
            fresh_copy(root, tmp_path / "proj2"),
            "run",
            "online",
            "--json",
            point=point,
            cache=tmp_path / "m2",
            env=emulator.env(),
        )
        assert other.code == 75, other
        assert f"pid {owner.pid}" in other.err
        out, err = owner.communicate(timeout=120)
        assert owner.returncode == 0, err
        assert json.loads(out)["state"] == "succeeded"
    finally:
        if owner.poll() is None:
            owner.kill()


def _owner_pid(point: Point) -> int | None:
    try:
        owner = point.head().get("owner")
    except Exception:  # noqa: BLE001 - not created yet
        return None
    return owner["pid"] if owner else None


EFFECT_WF = """
name: effects
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini}
actions:
  - name: draft
    prompt: "Draft a note for {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [draft]
    function: tools:send
    max_concurrency: 2
    effect: {idempotent: true}
"""
TOOLS = """
import os, time

def send(inputs, ctx):
    with open(os.environ["EFFECT_LOG"], "a") as log:
        log.write(f"{os.getpid()} {ctx.record_key} {time.time():.3f}\\n")
    time.sleep(0.05)
    return {"sent": ctx.record_key}
"""


def _effect_lines(log: Path) -> list[tuple[int, str, float]]:
    if not log.exists():
        return []
    rows = []
    for line in log.read_text().splitlines():
        pid, key, at = line.split()
        rows.append((int(pid), key, float(at)))
    return rows


def test_o2_paused_owner_that_resumes_gets_412_and_starts_no_effect(
    point: Point, emulator: Any, tmp_path: Path
) -> None:
    ttl = 3
    root = _project(
        tmp_path / "proj",
        point,
        EFFECT_WF,
        160,
        options=f"lease_ttl: {ttl}",
        files={"tools.py": TOOLS},
    )
    log = tmp_path / "effects.log"
    env = {**emulator.env(), "EFFECT_LOG": str(log)}
    first = spawn(root, "run", "effects", point=point, cache=tmp_path / "m1", env=env)
    second = None
    try:
        wait_for(lambda: len(_effect_lines(log)) >= 6, timeout=90)
        first.send_signal(signal.SIGSTOP)
        time.sleep(ttl + 2.5)  # past its lease by the server's clock
        second = spawn(
            fresh_copy(root, tmp_path / "proj2"),
            "run",
            "effects",
            "--json",
            point=point,
            cache=tmp_path / "m2",
            env=env,
        )
        started = second
        wait_for(
            lambda: (
                started.poll() is not None
                or any(pid == started.pid for pid, _, _ in _effect_lines(log))
            ),
            timeout=90,
        )
        assert second.poll() is None or second.returncode == 0, second.communicate()[1]
        resumed_at = time.time()
        first.send_signal(signal.SIGCONT)
        _out, err = first.communicate(timeout=240)
        assert first.returncode == 75, err
        assert f"pid {second.pid}" in err
        out2, err2 = second.communicate(timeout=120)
        assert second.returncode == 0, err2
        assert json.loads(out2)["state"] == "succeeded"
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            if proc is not None:
                proc.communicate()  # reaped, its pipes closed even when the test failed
    late = [row for row in _effect_lines(log) if row[0] == first.pid and row[2] > resumed_at]
    assert late == []  # after it resumed, the old owner started no effect
    assert {key for _, key, _ in _effect_lines(log)} == {f"r{i:04d}" for i in range(160)}


def test_o5_failed_put_mid_run_fails_closed_and_the_next_run_continues(
    point: Point, emulator: Any, tmp_path: Path
) -> None:
    options = "max_retries: 1, retry_timeout: 2" if point.kind == "s3" else ""
    root = _project(tmp_path / "proj", point, ONLINE_WF, 250, options=options)
    run = spawn(
        root, "run", "online", "--json", point=point, cache=tmp_path / "m1", env=emulator.env()
    )
    try:
        wait_for(lambda: _segments(point) >= 3, timeout=240)
        point.fail_writes_now()
        _out, err = run.communicate(timeout=90)
        assert run.returncode == 1, err  # S2: stopped, state unchanged, error shown
        assert "storage point" in err
    finally:
        point.heal()
        if run.poll() is None:
            run.kill()
        run.communicate()  # reaped, its pipes closed even when the test failed
    again = agac(
        root, "run", "online", "--json", point=point, cache=tmp_path / "m1", env=emulator.env()
    )
    assert again.code == 0, again
    summary = again.json()
    assert summary["state"] == "succeeded"
    assert all(a["answered"] == 250 for a in summary["actions"].values())


def _segments(point: Point) -> int:
    try:
        return sum(g["segments"] for g in point.head()["log"])
    except Exception:  # noqa: BLE001
        return 0
