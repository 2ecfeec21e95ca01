"""A batch action's judges and repairs in worker mode (The quality loop: checks): real
``agac worker`` processes on one PostgreSQL run them in batch rounds of their own, at the
batch price, as ``agac run`` does — the (action, file) batch shard submits, recovers,
polls and reads the rounds of its file, the online shards stage and settle them. Nothing
is asked live, nothing twice, and the ledger equals what the emulator saw. A worker
SIGKILLed in a round is taken over: its round's batch is adopted, not sent again."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from workers_support import agac, finish, log_of, query, start_worker, status

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

pytest.importorskip("openai")

BAD = json.dumps({"label": "bad", "total": -5})
WF = """
name: wjudge
input: {path: data/, id_field: id}
defaults:
  model: openai/gpt-4o-mini
  run_mode: batch
  max_tokens: 64
  poll_interval: 1s
actions:
  - name: label
    prompt: "Label {{ source.text }}"
    schema:
      type: object
      properties: {label: {type: string}, total: {type: number}}
      required: [label, total]
      additionalProperties: false
    checks:
      - name: judged
        judge: {model: openai/gpt-4o-mini, prompt: "Record: {{ source.text }} Grade {{ answer | tojson }}"}
        message: the label must describe the record
        on_fail: %s
"""
ARGS = ("--concurrency", "4", "--lease-ttl", "3", "--poll", "0.3", "--exit-when-done")


def _project(root: Path, on_fail: str, files: int) -> None:
    data = {
        f"data/f{i}.jsonl": [
            {
                "id": f"f{i}r{j}",
                "text": f"item {i}-{j}"
                + (
                    f' [[emulator answers: {BAD}]] [[emulator judges fail: "bad"]]'
                    if (i, j) == (0, 1)
                    else ""
                ),
            }
            for j in range(3)
        ]
        for i in range(files)
    }
    write_project(root, WF % on_fail, workflow_file="wjudge.yml", data=data)


def _origins(root: Path, env: dict[str, str], run_id: str) -> dict[tuple[str, str], int]:
    """(origin, tier) -> calls in the run's ledger."""
    done = agac(root, env, "cost", run_id, "--json")
    assert done.returncode == 0, done.stderr
    out: dict[tuple[str, str], int] = {}
    for r in json.loads(done.stdout)["rows"]:
        key = (r["origin"], r["tier"])
        out[key] = out.get(key, 0) + r["calls"]
    return out


def _batch_actions(url: str, run_id: str) -> list[str]:
    rows = query(url, "SELECT action FROM batches WHERE run_id = %s ORDER BY action", run_id)
    return [r[0] for r in rows]


def _passed(summary: dict[str, Any]) -> tuple[int, int]:
    judged = summary["checks"]["label"]["judged"]
    return judged["passed"], judged["failed"]


def _seen(stats: dict[str, Any]) -> tuple[int, int, int]:
    """(live chat calls, batches created, requests in them) the emulator saw."""
    ops = stats["requests"]["openai"]
    return (
        ops.get("chat", 0),
        ops.get("batch.create", 0),
        sum(b["requests"] for b in stats["batches"]),
    )


@pytest.mark.parametrize(
    ("on_fail", "batches", "judged", "repaired"),
    [
        ("flag", ["label"] * 2 + ["label.judge.judged"] * 2, 6, 0),
        # f0r1 repaired in a third round (f0's file only), the repair judged in a fourth
        (
            "repair",
            ["label"] * 2 + ["label.judge.judged"] * 3 + ["label.repair"],
            7,
            1,
        ),
    ],
)
def test_i38_worker_batch_judges_and_repairs_go_in_batch_rounds(
    tmp_path: Path,
    fresh_pg_database: str,
    on_fail: str,
    batches: list[str],
    judged: int,
    repaired: int,
) -> None:
    _project(tmp_path, on_fail, files=2)
    with RunningEmulator(batch_seconds=1) as emu:
        env = {**emu.env(), "AGAC_STORE": fresh_pg_database}
        sub = agac(tmp_path, env, "submit", "wjudge", "--json")
        assert sub.returncode == 0, sub.stderr
        run_id = json.loads(sub.stdout)["run_id"]
        workers = [start_worker(tmp_path, env, *ARGS) for _ in range(2)]
        reports = [finish(w, timeout=240) for w in workers]
        stats = emu.stats()

    summary = status(tmp_path, env, run_id)
    assert summary["state"] == "succeeded", summary
    label = summary["actions"]["label"]
    assert (label["answered"], label["failed"], label["pending"]) == (6, 0, 0), label
    if on_fail == "flag":
        assert _passed(summary) == (5, 1)
    else:  # the repaired answer passed its judge
        assert _passed(summary) == (6, 0)
    # Nothing live: the answers, the judges and the repair each went in a batch, one per
    # round and file, none sent twice.
    live, created, sent = _seen(stats)
    assert live == 0, log_of(workers[0])[-2000:]
    assert _batch_actions(fresh_pg_database, run_id) == batches
    assert created == len(batches)
    # The ledger is what the emulator saw: every call at the batch tier, judges as judge.
    ledger = _origins(tmp_path, env, run_id)
    assert ledger == {("call", "batch"): 6 + repaired, ("judge", "batch"): judged}, ledger
    assert sum(ledger.values()) == sent
    assert sum(len(r["finalized"]) for r in reports) == 1


@pytest.mark.parametrize(
    "point",
    [
        "after_submit:2",  # the judges' batch accepted by the provider, not yet recorded
        "before_collected:2",  # the verdicts read and stored, the batch not marked read
    ],
)
def test_i38_worker_batch_judges_a_sigkilled_worker_mid_round_is_taken_over(
    tmp_path: Path, fresh_pg_database: str, point: str
) -> None:
    """The doomed worker runs alone until it is killed in the judges' round (its second
    batch: one input file); a second worker takes its shards over when the leases expire,
    finds the judges' batch instead of sending it again, and ends the run."""
    _project(tmp_path, "flag", files=1)
    with RunningEmulator(batch_seconds=1) as emu:
        env = {**emu.env(), "AGAC_STORE": fresh_pg_database}
        run_id = json.loads(agac(tmp_path, env, "submit", "wjudge", "--json").stdout)["run_id"]
        doomed = start_worker(tmp_path, {**env, "AGAC_CRASH_AT": point}, *ARGS)
        doomed.communicate(timeout=240)
        assert doomed.returncode == -signal.SIGKILL, log_of(doomed)[-3000:]
        live, created, _ = _seen(emu.stats())
        assert (live, created) == (0, 2)  # the answers' batch and the judges' were sent
        survivor = start_worker(tmp_path, env, *ARGS)
        report = finish(survivor, timeout=240)
        stats = emu.stats()

    summary = status(tmp_path, env, run_id)
    assert summary["state"] == "succeeded", (summary, log_of(survivor)[-2000:])
    assert summary["actions"]["label"]["answered"] == 3
    assert _passed(summary) == (2, 1)
    live, created, sent = _seen(stats)
    assert (live, created) == (0, 2)  # nothing asked again, nothing live
    assert _batch_actions(fresh_pg_database, run_id) == ["label", "label.judge.judged"]
    ledger = _origins(tmp_path, env, run_id)
    assert ledger == {("call", "batch"): 3, ("judge", "batch"): 3}, ledger  # paid once
    assert sum(ledger.values()) == sent
    assert report["finalized"] == [run_id]
    taken = query(
        fresh_pg_database,
        "SELECT count(*) FROM shards WHERE run_id = %s AND kind = 'batch' AND claims > 1",
        run_id,
    )[0][0]
    assert taken >= 1
