"""R4 deadlines and R5 budgets when ``agac worker`` processes advance a submitted run.

Worker mode runs the same unit code as ``agac run`` (engine/units.py), but each shard
has an executor and a budget guard of its own, in its own process. These tests submit a
run, start real worker subprocesses on the session's PostgreSQL and check what the run
guarantees (docs/guarantees.md, Runs) promise: the final state, every unit accounted for with its reason (status and
export), no call sent after the stop beyond those in flight, the cost ledger, and that
a later run reuses what was paid for."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from workers_support import agac, finish, query, start_worker, status, terminate, wait_for

from agac.engine.limits.budget import RunLedger, spent_by
from agac.store.repository import Store
from agac.store.values import FINAL_STATES, RunSettings
from agac.testing import write_project

CONCURRENCY = 4


def _data(files: int, per_file: int) -> dict[str, list[dict[str, Any]]]:
    return {
        f"data/f{i:02d}.jsonl": [
            {"id": f"f{i}r{j}", "text": f"review {i} {j}"} for j in range(per_file)
        ]
        for i in range(files)
    }


def _accounted(summary: dict[str, Any], records: int) -> None:
    for name, a in summary["actions"].items():
        assert a["records"] == records, (name, a)
        assert a["answered"] + a["failed"] + a["skipped"] == records and a["pending"] == 0, (
            name,
            a,
        )


def _export(
    root: Path, env: dict[str, str], workflow: str, action: str, run_id: str
) -> list[dict[str, Any]]:
    out = root / f"export-{action}-{run_id}.jsonl"
    done = agac(
        root, env, "export", workflow, "--action", action, "--run", run_id, "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    return [
        json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def _workers(root: Path, env: dict[str, str], n: int) -> list[dict[str, Any]]:
    procs = [
        start_worker(
            root, env, "--concurrency", str(CONCURRENCY), "--poll", "0.3", "--exit-when-done"
        )
        for _ in range(n)
    ]
    return [finish(p, timeout=240) for p in procs]


def _live_workers(url: str) -> int:
    return int(query(url, "SELECT count(*) FROM workers WHERE state = 'running'")[0][0])


# -- R4 ---------------------------------------------------------------------------------------

DEADLINE_WF = """
name: timed
input: {path: data/, id_field: id}
deadline: 8s
defaults: {model: mock/m1, max_concurrency: 8}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
  - name: summarize
    dependencies: [classify]
    prompt: "Summarize {{ source.text }} given {{ classify.text }}"
"""
D_FILES, D_PER_FILE = 4, 600


def test_r4_deadline_in_worker_mode_ends_timed_out_and_sends_nothing_after_it(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    write_project(tmp_path, DEADLINE_WF, workflow_file="timed.yml", data=_data(D_FILES, D_PER_FILE))
    env = {"AGAC_STORE": fresh_pg_database, "AGAC_MOCK_LATENCY_MS": "40"}
    # The workers are up and looking for work before the run is admitted: the 8 s from
    # admission are spent on the run, not on starting processes on a loaded machine.
    assert agac(tmp_path, env, "store", "upgrade").returncode == 0
    procs = [
        start_worker(tmp_path, env, "--concurrency", str(CONCURRENCY), "--poll", "0.3")
        for _ in range(2)
    ]
    wait_for(
        lambda: _live_workers(fresh_pg_database) == 2, 120, "both workers to be looking for work"
    )
    sub = agac(tmp_path, env, "submit", "timed", "--json")
    assert sub.returncode == 0, sub.stderr
    run_id = json.loads(sub.stdout)["run_id"]
    deadline_at = json.loads(
        query(fresh_pg_database, "SELECT options FROM runs WHERE id = %s", run_id)[0][0]
    )["deadline_at"]
    # two workers of 4 calls each need far longer than 8 s for 4,800 calls of 40 ms
    wait_for(
        lambda: (
            query(fresh_pg_database, "SELECT state FROM runs WHERE id = %s", run_id)[0][0]
            in FINAL_STATES
        ),
        240,
        "the run's end",
    )
    reports = [terminate(p) for p in procs]

    records = D_FILES * D_PER_FILE
    summary = status(tmp_path, env, run_id)
    assert summary["state"] == "timed_out", summary
    _accounted(summary, records)
    c, s = summary["actions"]["classify"], summary["actions"]["summarize"]
    # the deadline passed while workers were mid-run: some answers, the rest never sent
    assert 0 < c["answered"] < records, c
    assert c["failed"] == 0 and set(c["reasons"]) == {"deadline"}, c
    assert s["failed"] == 0 and set(s["reasons"]) <= {"deadline"}, s
    assert (
        c["reasons"]["deadline"] == c["skipped"] and s["reasons"].get("deadline", 0) == s["skipped"]
    )
    # every call is an answered unit: nothing was asked and then dropped
    assert c["calls"] == c["answered"] and s["calls"] == s["answered"]
    # both workers took part, exited 0, and exactly one ended the run
    assert all(r["shards"] for r in reports), reports
    assert sum(len(r["finalized"]) for r in reports) == 1
    ended = query(
        fresh_pg_database,
        "SELECT count(*) FROM events WHERE run_id = %s AND kind = 'run_ended'",
        run_id,
    )
    assert ended[0][0] == 1
    assert (
        query(fresh_pg_database, "SELECT count(*) FROM outcomes WHERE run_id = %s", run_id)[0][0]
        == 2 * records
    )

    # No call was sent after the deadline; the only ones answered after it were in flight
    # at the deadline: at most --concurrency per worker.
    calls = query(
        fresh_pg_database,
        "SELECT created_at, latency_ms FROM usage WHERE run_id = %s AND kind = 'llm'",
        run_id,
    )
    assert len(calls) == c["calls"] + s["calls"]
    sent_late = [at - ms / 1000 for at, ms in calls if at - ms / 1000 > deadline_at + 0.05]
    assert sent_late == [], (len(sent_late), deadline_at)
    finished_late = sum(1 for at, _ in calls if at > deadline_at)
    assert finished_late <= 2 * CONCURRENCY, finished_late

    # export names the reason of every unit not answered
    rows = _export(tmp_path, env, "timed", "classify", run_id)
    assert len(rows) == records
    by_status: dict[str, int] = {}
    for row in rows:
        by_status[row["status"]] = by_status.get(row["status"], 0) + 1
        if row["status"] == "skipped":
            assert row["reason"] == "deadline", row
    assert by_status == {"answered": c["answered"], "skipped": c["skipped"]}

    # A new run without the deadline (it is not part of config_hash) reuses every answer
    # paid for and asks only the rest.
    paid = {
        r[0]
        for r in query(
            fresh_pg_database,
            "SELECT fingerprint FROM usage WHERE run_id = %s AND kind = 'llm'",
            run_id,
        )
    }
    (tmp_path / "timed.yml").write_text(DEADLINE_WF.replace("deadline: 8s\n", ""), encoding="utf-8")
    again = agac(tmp_path, {**env, "AGAC_MOCK_LATENCY_MS": "0"}, "submit", "timed", "--json")
    assert again.returncode == 0, again.stderr
    second_id = json.loads(again.stdout)["run_id"]
    assert second_id != run_id
    _workers(tmp_path, {**env, "AGAC_MOCK_LATENCY_MS": "0"}, 1)
    second = status(tmp_path, env, second_id)
    assert second["state"] == "succeeded", second
    _accounted(second, records)
    for name, before in (("classify", c), ("summarize", s)):
        a = second["actions"][name]
        assert a["reused"] == before["answered"], (name, a)
        assert a["calls"] == records - before["answered"], (name, a)
    asked_again = query(
        fresh_pg_database,
        "SELECT count(*) FROM usage WHERE run_id = %s AND kind = 'llm' AND fingerprint = ANY(%s)",
        second_id,
        list(paid),
    )[0][0]
    assert asked_again == 0


# -- R5 ---------------------------------------------------------------------------------------

# USD per million tokens: one token costs $0.001.
PRICED = "prices: {mock/m1: {input: 1000, output: 1000}}\n"
BUDGET_USD = 1.5
BUDGET_WF = f"""
name: capped
input: {{path: data/, id_field: id}}
budget: {{usd: {BUDGET_USD}}}
defaults: {{model: mock/m1, max_concurrency: 8, max_tokens: 16}}
actions:
  - name: classify
    prompt: "Classify: {{{{ source.text }}}}"
"""
B_FILES, B_PER_FILE = 4, 150


def test_r5_budget_in_worker_mode_ends_exhausted_within_the_per_shard_bound(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    write_project(
        tmp_path,
        BUDGET_WF,
        workflow_file="capped.yml",
        data=_data(B_FILES, B_PER_FILE),
        agac_yml=PRICED,
    )
    env = {"AGAC_STORE": fresh_pg_database, "AGAC_MOCK_LATENCY_MS": "30"}
    refused = agac(tmp_path, env, "submit", "capped", "--json")
    assert refused.returncode == 2, refused.stdout  # the estimate alone is over the cap
    sub = agac(tmp_path, env, "submit", "capped", "--allow-over-estimate", "--json")
    assert sub.returncode == 0, sub.stderr
    run_id = json.loads(sub.stdout)["run_id"]
    reports = _workers(tmp_path, env, 2)

    records = B_FILES * B_PER_FILE
    summary = status(tmp_path, env, run_id)
    assert summary["state"] == "exhausted", summary
    _accounted(summary, records)
    c = summary["actions"]["classify"]
    assert 0 < c["answered"] < records, c
    assert c["failed"] == 0 and set(c["reasons"]) == {"budget_exhausted"}, c
    assert c["calls"] == c["answered"]
    assert all(r["shards"] for r in reports), reports
    assert sum(len(r["finalized"]) for r in reports) == 1

    # The documented bound (docs/decisions/0051-worker-budgets-through-the-ledger.md): the
    # cap plus the worst case of the calls in flight in every worker at once.
    # (a mock request's input tokens are the estimate's ceil(chars / 4); max_tokens is 16)
    worst = (
        query(fresh_pg_database, "SELECT max(input_tokens) FROM usage WHERE run_id = %s", run_id)[
            0
        ][0]
        + 16
    ) * 0.001
    spent = float(
        query(
            fresh_pg_database,
            "SELECT coalesce(sum(cost_usd), 0) FROM usage WHERE run_id = %s",
            run_id,
        )[0][0]
    )
    assert spent > 0
    assert spent <= BUDGET_USD + 2 * CONCURRENCY * worst + 1e-9, (spent, BUDGET_USD, worst)
    assert summary["budget"]["spent_usd"] == round(spent, 6)

    # agac cost agrees with the usage ledger, row by row and in total
    cost = agac(tmp_path, env, "cost", run_id, "--json")
    assert cost.returncode == 0, cost.stderr
    doc = json.loads(cost.stdout)
    assert abs(doc["cost_usd"] - spent) < 1e-6
    assert sum(r["calls"] for r in doc["rows"]) == c["calls"]
    assert abs(summary["cost_usd"] - spent) < 1e-6

    rows = _export(tmp_path, env, "capped", "classify", run_id)
    assert (
        sum(1 for r in rows if r["status"] == "skipped" and r["reason"] == "budget_exhausted")
        == c["skipped"]
        > 0
    )


USAGE_ROW = (
    "INSERT INTO usage (run_id, action, unit_key, attempt, kind, provider, model, tier, input_tokens, "
    "cached_tokens, cache_write_tokens, output_tokens, cost_usd, latency_ms, status, created_at) "
    "VALUES (%s, 'classify', 'k', 1, 'llm', 'mock', 'm1', 'live', 3, 0, 0, 2, %s, 1, 'ok', 0) RETURNING id"
)
"""One call of 5 tokens at the given cost."""


def _usage_sql(run_id: str, cost: float) -> tuple[str, tuple[Any, ...]]:
    return USAGE_ROW, (run_id, cost)


def test_r5_run_ledger_reads_incrementally_and_counts_rows_committed_out_of_id_order(
    fresh_pg_database: str,
) -> None:
    store = Store(fresh_pg_database)
    try:
        run = SimpleNamespace(
            id="r1",
            settings=RunSettings.from_json(json.dumps({"spent_before": {"usd": 0.5, "tokens": 7}})),
        )
        ledger = RunLedger(store, run, settle=1.0)
        assert ledger.read() == (0.5, 7)
        with psycopg.connect(fresh_pg_database, autocommit=True) as conn:
            for _ in range(3):
                conn.execute(*_usage_sql("r1", 0.25))
            conn.execute(*_usage_sql("other", 9.0))  # another run's spending is not this run's
            with psycopg.connect(fresh_pg_database) as slow:
                # a transaction draws an id and commits after a later id is visible
                late = slow.execute(*_usage_sql("r1", 1.0)).fetchone()
                assert late is not None
                early = conn.execute(*_usage_sql("r1", 0.125)).fetchone()
                assert early is not None and early[0] > late[0]
                usd, tokens = ledger.read()
                assert usd == 0.5 + 0.75 + 0.125 and tokens == 7 + 4 * 5
                time.sleep(0.3)
                assert ledger.read() == (usd, tokens)  # not settled yet: nothing summed for good
                slow.commit()
            time.sleep(1.2)  # the read that saw `early` is now settled: its ids are summed once
            usd, tokens = ledger.read()
            assert usd == 0.5 + 0.75 + 0.125 + 1.0 and tokens == 7 + 5 * 5
            usd, tokens = ledger.read()
            assert ledger.base_id >= early[0]  # later reads start after the settled rows
            conn.execute(*_usage_sql("r1", 2.0))
            usd, tokens = ledger.read()
        assert usd == 0.5 + 0.75 + 0.125 + 1.0 + 2.0 and tokens == 7 + 6 * 5
        assert (usd, tokens) == spent_by(store, run)  # the same total as the full ledger read
    finally:
        store.close()


# A batch action on a dear model next to an online action on a cheap one, over a small
# file and a large one. The small file's batch is submitted (by a batch shard) while the
# large file's online shard is still spending: that shard must count the batch's
# reservation from then on, not only the batches out when it started.
MIXED_PRICES = (
    "prices: {openai/gpt-4o-mini: {input: 1000, output: 1000}, "
    "openai/gpt-4o: {input: 4000, output: 4000}}\n"
)
MIXED_USD = 6.0
MIXED_WF = f"""
name: mixed
input: {{path: data/, id_field: id}}
budget: {{usd: {MIXED_USD}}}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 64
  max_concurrency: 8
  poll_interval: 1s
  retry: {{max_attempts: 3, backoff: {{initial: 10ms, max: 50ms}}}}
actions:
  - name: classify
    prompt: "Classify: {{{{ source.text }}}}"
  - name: tag
    model: openai/gpt-4o
    run_mode: batch
    prompt: "Tag: {{{{ source.text }}}}"
"""
MIXED_CONCURRENCY = 2


def test_r5_budget_in_worker_mode_counts_a_batch_another_worker_submitted(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    pytest.importorskip("openai")
    from agac.emulator.testing import RunningEmulator
    from agac.providers.base import Usage
    from agac.providers.pricing import PriceTable

    data = {
        "data/f00.jsonl": _data(1, 20)["data/f00.jsonl"],
        "data/f01.jsonl": _data(2, 600)["data/f01.jsonl"],
    }
    write_project(tmp_path, MIXED_WF, workflow_file="mixed.yml", data=data, agac_yml=MIXED_PRICES)
    with RunningEmulator(latency_ms=80, batch_seconds=2) as emu:
        env = {**emu.env(), "AGAC_STORE": fresh_pg_database}
        sub = agac(tmp_path, env, "submit", "mixed", "--allow-over-estimate", "--json")
        assert sub.returncode == 0, sub.stderr
        run_id = json.loads(sub.stdout)["run_id"]
        procs = [
            start_worker(
                tmp_path,
                env,
                "--concurrency",
                str(MIXED_CONCURRENCY),
                "--poll",
                "0.3",
                "--exit-when-done",
            )
            for _ in range(2)
        ]
        reports = [finish(p, timeout=180) for p in procs]

    summary = status(tmp_path, env, run_id)
    assert summary["state"] == "exhausted", summary
    _accounted(summary, 620)
    tag, classify = summary["actions"]["tag"], summary["actions"]["classify"]
    assert tag["answered"] == 20 and tag["reasons"] == {"budget_exhausted": 600}, (
        tag
    )  # f00's batch only
    assert 0 < classify["answered"] < 620 and set(classify["reasons"]) == {"budget_exhausted"}, (
        classify
    )
    assert sum(len(r["finalized"]) for r in reports) == 1

    # What the run committed to: the live calls it paid plus the worst case its batch
    # reserved (the batch tier of input + max_tokens per request), within the cap plus
    # the calls in flight in both workers.
    prices = PriceTable(
        {
            "openai/gpt-4o-mini": {"input": 1000, "output": 1000},
            "openai/gpt-4o": {"input": 4000, "output": 4000},
        }
    )
    live = float(
        query(
            fresh_pg_database,
            "SELECT coalesce(sum(cost_usd), 0) FROM usage WHERE run_id = %s AND tier = 'live'",
            run_id,
        )[0][0]
    )
    reserved = 0.0
    for (request,) in query(
        fresh_pg_database,
        "SELECT i.request FROM batch_items i JOIN batches b "
        "ON b.key = i.batch_key WHERE b.run_id = %s",
        run_id,
    ):
        chars = sum(len(m["content"]) for m in json.loads(request)["messages"])
        reserved += prices.cost("openai/gpt-4o", Usage(-(-chars // 4), 64), "batch")
    worst_call = (
        query(
            fresh_pg_database,
            "SELECT max(input_tokens) FROM usage WHERE run_id = %s AND tier = 'live'",
            run_id,
        )[0][0]
        + 64
    ) * 0.001
    assert reserved > 1.0  # the batch's reservation is a large share of the cap
    assert live + reserved <= MIXED_USD + 2 * MIXED_CONCURRENCY * worst_call + 1e-9, (
        live,
        reserved,
    )
    spent = float(
        query(
            fresh_pg_database,
            "SELECT coalesce(sum(cost_usd), 0) FROM usage WHERE run_id = %s",
            run_id,
        )[0][0]
    )
    assert abs(summary["cost_usd"] - spent) < 1e-6
