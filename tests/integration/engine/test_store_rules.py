"""S2, S3, S4, S5 on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from engine_helpers import BASIC, rows, run

from agac.clock import SYSTEM, Clock, ManualClock
from agac.engine.lifecycle.leases import take_run_lease
from agac.errors import LeaseHeld, LeaseLost, StoreError
from agac.store.repository import Store
from agac.store.rows import Checkpoint


@pytest.fixture
def stores():
    """Open stores through this and they are closed after the test."""
    opened: list[Store] = []

    def _open(url: str, clock: Clock = SYSTEM) -> Store:
        opened.append(Store(url, clock=clock))
        return opened[-1]

    yield _open
    for s in opened:
        s.close()


def test_s4_every_unit_accounted_with_a_reason(project: Path, make, stores) -> None:
    wf = """
    name: wf
    input: {path: data/, id_field: id}
    defaults: {model: mock/m1}
    actions:
      - name: classify
        prompt: "Classify: {{ source.text }}"
        schema: {type: object, properties: {label: {enum: [a, b]}}, required: [label]}
      - name: reply
        dependencies: [classify]
        when: "classify.label == 'a'"
        prompt: "Reply to {{ source.text }}"
      - name: check
        kind: tool
        dependencies: [classify]
        function: tools:check
    """
    data = rows(30) + ['{"id": "broken", "text": ', {"id": "r00001", "text": "dup"}]
    make(
        project,
        wf,
        data={"data/a.jsonl": data},
        files={
            "tools.py": """
        def check(inputs, ctx):
            if inputs["source"]["text"].endswith("7"):
                raise ValueError("no sevens")
            return {"ok": True}
    """
        },
    )
    summary = run(project).summary
    assert summary["state"] == "partial"
    for name, a in summary["actions"].items():
        assert a["records"] == 32, name
        assert a["answered"] + a["failed"] + a["skipped"] + a["pending"] == a["records"], name
        assert a["pending"] == 0
        assert sum(a["reasons"].values()) == a["failed"] + a["skipped"], name
    c = summary["actions"]["classify"]
    assert c["reasons"] == {"invalid_input": 1, "duplicate_key": 1}
    assert summary["actions"]["reply"]["reasons"]["upstream_failed"] == 2
    assert summary["actions"]["reply"]["reasons"]["guard"] >= 1
    assert summary["actions"]["check"]["reasons"] == {"upstream_failed": 2, "tool_error": 3}
    store = stores(os.environ["AGAC_STORE"])
    outcomes = store.unit_outcomes(summary["run_id"], "a.jsonl:31")
    bad = {o.action: o for o in outcomes}
    assert bad["classify"].reason == "invalid_input"
    assert bad["classify"].detail.startswith("a.jsonl:31:")


def test_s5_answers_reused_across_runs_by_fingerprint(project: Path, make) -> None:
    make(project)
    first = run(project).summary
    assert first["actions"]["classify"]["calls"] == 20
    second = run(project).summary
    assert second["run_id"] != first["run_id"]
    for a in second["actions"].values():
        assert a["calls"] == 0 and a["reused"] == 20 and a["answered"] == 20


def test_s5_single_flight_identical_requests_asked_once(project: Path, make, monkeypatch) -> None:
    monkeypatch.setenv("AGAC_MOCK_LATENCY_MS", "30")
    make(project, data={"data/a.jsonl": rows(25, same_text=True)})
    summary = run(project).summary
    c = summary["actions"]["classify"]
    assert c["answered"] == 25
    assert c["calls"] == 1
    assert c["reused"] == 24


def test_s5_edited_prompt_reasks_only_changed_requests(project: Path, make) -> None:
    make(project)
    run(project)
    edited = BASIC.replace("Summarize {{ source.text }}", "Summarise briefly {{ source.text }}")
    (project / "workflows/wf.yml").write_text(edited)
    summary = run(project).summary
    assert summary["actions"]["classify"]["calls"] == 0
    assert summary["actions"]["classify"]["reused"] == 20
    assert summary["actions"]["summarize"]["calls"] == 20


def test_s3_fencing_token_refuses_a_stale_writer(store_url: str, stores) -> None:
    clock = ManualClock()
    store = stores(store_url, clock)
    first = store.acquire_lease("run:x", host="h1", pid=1, ttl=0.05)
    clock.advance(0.1)  # the first lease expires
    second = store.acquire_lease("run:x", host="h2", pid=2, ttl=30)
    assert second == first + 1
    with pytest.raises(LeaseLost):
        store.checkpoint(Checkpoint(), lease=("run:x", first, 30))
    store.checkpoint(Checkpoint(), lease=("run:x", second, 30))


def test_s3_live_owner_elsewhere_is_reported(store_url: str, stores) -> None:
    store = stores(store_url)
    store.acquire_lease("run:y", host="other-host", pid=4242, ttl=30)
    with pytest.raises(LeaseHeld) as info:
        take_run_lease(store, "y", wait=False)
    assert "other-host" in str(info.value) and "4242" in str(info.value)
    assert info.value.exit_code == 75


def test_s3_dead_process_on_this_host_is_taken_over_at_once(store_url: str, stores) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(proc.stdout)
    store = stores(store_url)
    store.acquire_lease("run:z", host=socket.gethostname(), pid=dead_pid, ttl=3600)
    lease = take_run_lease(store, "z", wait=False)
    assert lease.token == 2


def test_s3_live_process_on_this_host_is_not_taken_over(store_url: str, stores) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        store = stores(store_url)
        store.acquire_lease("run:w", host=socket.gethostname(), pid=sleeper.pid, ttl=3600)
        with pytest.raises(LeaseHeld):
            take_run_lease(store, "w", wait=False)
    finally:
        sleeper.kill()
        sleeper.wait()


def _install_failing_trigger(url: str, key: str) -> None:
    """A real database failure: inserting the outcome of record ``key`` aborts."""
    store = Store(url)
    engine = store.engine
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql(
                "CREATE TRIGGER agac_test_fail BEFORE INSERT ON outcomes "
                f"WHEN NEW.unit_key = '{key}' "
                "BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END"
            )
        else:
            conn.exec_driver_sql(
                "CREATE FUNCTION agac_test_fail() RETURNS trigger AS $$ BEGIN "
                f"IF NEW.unit_key = '{key}' THEN "
                "RAISE EXCEPTION 'disk full (test)'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER agac_test_fail BEFORE INSERT ON outcomes "
                "FOR EACH ROW EXECUTE FUNCTION agac_test_fail()"
            )
    store.close()


def _drop_failing_trigger(url: str) -> None:
    store = Store(url)
    engine = store.engine
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("DROP TRIGGER agac_test_fail")
        else:
            conn.exec_driver_sql("DROP TRIGGER agac_test_fail ON outcomes")
    store.close()


def test_s2_failed_checkpoint_stops_the_run_and_the_next_run_continues(
    project: Path, make, stores, monkeypatch
) -> None:
    url = os.environ["AGAC_STORE"]
    monkeypatch.setenv("AGAC_MOCK_LATENCY_MS", "10")
    make(project, data={"data/a.jsonl": rows(200)})
    _install_failing_trigger(url, "r00150")
    with pytest.raises(StoreError) as info:
        run(project)
    assert info.value.exit_code == 1
    store = stores(url)
    (open_run,) = store.list_runs("wf")
    assert open_run.state == "running"  # unchanged: never final on a store failure
    with store.engine.connect() as conn:
        kept = conn.execute(sa.text("SELECT count(*) FROM outcomes")).scalar()
    assert 0 < kept < 400
    _drop_failing_trigger(url)
    summary = run(project).summary
    assert summary["run_id"] == open_run.id
    assert summary["state"] == "succeeded"
    c = summary["actions"]["classify"]
    assert c["answered"] == 200
    # Calls paid before the failure but never committed are asked again: at most the
    # calls that were in flight (max_concurrency 8 per action) plus what had been kept.
    assert c["calls"] <= 200 + 8 + 2 * 8


def test_secrets_never_reach_the_store(project: Path, make, monkeypatch, stores) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-value-123")
    monkeypatch.setenv("AGAC_SECRET", "signing-secret-456")
    make(project)
    run(project)
    store = stores(os.environ["AGAC_STORE"])
    with store.engine.connect() as conn:
        for table in ("runs", "events", "answers", "usage", "outcomes", "records", "snapshots"):
            for row in conn.execute(sa.text(f"SELECT * FROM {table}")):
                text = " ".join(str(v) for v in row)
                assert "sk-very-secret" not in text and "signing-secret" not in text


def test_s3_effect_and_proposal_writes_of_a_stale_owner_are_refused(store_url: str, stores) -> None:
    """Writes made outside group commits (effect intents and receipts, proposals and their
    use) check the fencing token in their own transaction, like every checkpoint."""
    clock = ManualClock()
    store = stores(store_url, clock)
    first = store.acquire_lease("run:fx", host="h1", pid=1, ttl=0.05)
    clock.advance(0.1)  # the first lease expires
    second = store.acquire_lease("run:fx", host="h2", pid=2, ttl=30)
    stale, live = ("run:fx", first, 30.0), ("run:fx", second, 30.0)
    effect = {
        "key": "k1",
        "workflow": "fx",
        "action": "send",
        "unit_key": "r1",
        "function": "t:f",
        "idempotent": False,
        "compensate": None,
        "run_id": "run1",
        "arguments": "{}",
    }
    with pytest.raises(LeaseLost):
        store.start_effect(effect, lease=stale)
    assert store.get_effect("k1") is None
    store.start_effect(effect, lease=live)
    with pytest.raises(LeaseLost):
        store.update_effect("k1", state="succeeded", receipt="{}", lease=stale)
    assert store.get_effect("k1").state == "started"
    now = time.time()
    proposal = {
        "id": "p1",
        "tenant": "default",
        "workflow": "fx",
        "action": "send",
        "unit_key": "r1",
        "seq": 0,
        "run_id": "run1",
        "subject": "s" * 64,
        "parent": None,
        "arguments": "{}",
        "policy_version": "1",
        "approvers": "[]",
        "proposed_by": None,
        "expires_at": now + 60,
        "state": "pending",
        "content_hash": "c" * 64,
        "signature": "g" * 64,
        "created_at": now,
        "updated_at": now,
    }
    with pytest.raises(LeaseLost):
        store.insert_proposal(proposal, lease=stale)
    assert store.get_proposal("p1") is None
    store.insert_proposal(proposal, lease=live)
    with pytest.raises(LeaseLost):
        store.change_proposal("p1", ["pending"], state="expired", lease=stale)
    with pytest.raises(LeaseLost):
        store.adopt_proposal("p1", "run2", lease=stale)
    assert store.change_proposal("p1", ["pending"], state="approved", decided_by="ann")  # a person
    with pytest.raises(LeaseLost):
        store.use_proposal("p1", "run1", lease=stale)
    row = store.get_proposal("p1")
    assert (row.state, row.run_id, row.used_by) == ("approved", "run1", None)
    assert store.use_proposal("p1", "run1", lease=live)
