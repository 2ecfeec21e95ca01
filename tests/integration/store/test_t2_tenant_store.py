"""T2 in the store, on SQLite and PostgreSQL: a run keeps its tenant; at most one run that is
not final per (tenant, workflow), held by the store itself; answers, tool results, batches,
effects and proposals are looked up within a tenant; a store made before tenants is
migrated with every row in tenant ``default``, and keeps working."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from agac.engine.approvals.proposals import content_hash, sign, tampered
from agac.errors import RefusedError
from agac.store import database
from agac.store import tables as t
from agac.store.database import HEAD_REVISION, create_store_engine, current_revision, upgrade
from agac.store.repository import Store
from agac.store.rows import AnswerRow, Checkpoint, ToolResultRow
from agac.store.runs import RunAlreadyOpen
from agac.store.values import RunSettings


def _admit(store: Store, run_id: str, tenant: str, workflow: str = "wf") -> None:
    store.create_run(
        id=run_id,
        workflow=workflow,
        workflow_path=f"{workflow}.yml",
        retry_of=None,
        config={"actions": []},
        config_hash="h",
        snapshot_id="s",
        fresh=False,
        settings=RunSettings(),
        tenant=tenant,
    )


def test_t2_one_open_run_per_tenant_and_workflow_is_held_by_the_store(store_url: str) -> None:
    store = Store(store_url)
    try:
        _admit(store, "a1", "acme")
        _admit(store, "b1", "beta")  # another tenant: its own open run of the same workflow
        _admit(store, "a2", "acme", workflow="other")
        with pytest.raises(RunAlreadyOpen) as refused:
            _admit(store, "a3", "acme")
        assert isinstance(refused.value, RefusedError) and "acme" in refused.value.message
        assert store.open_run("wf", tenant="acme").id == "a1"
        assert store.open_run("wf", tenant="beta").id == "b1"
        assert store.open_run("wf", tenant="default") is None
        store.end_run("a1", "succeeded")
        _admit(store, "a3", "acme")  # the first ended: a new one may open
        assert store.open_run("wf", tenant="acme").id == "a3"
        assert store.get_run("a3").tenant == "acme"
        assert store.get_run("a3", tenants=("beta",)) is None  # another tenant's: not found
        assert [r.id for r in store.list_runs(tenants=("acme",))] == ["a3", "a2", "a1"]
        assert store.latest_run("wf", tenant="beta", final=True) is None
    finally:
        store.close()


def test_t2_two_processes_admitting_at_once_leave_one_open_run(store_url: str) -> None:
    """Two admissions racing on one (tenant, workflow): the store keeps exactly one."""
    stores = [Store(store_url) for _ in range(6)]
    won: list[str] = []
    lost: list[str] = []
    gate = threading.Barrier(len(stores))

    def admit(i: int) -> None:
        gate.wait()
        try:
            _admit(stores[i], f"r{i}", "acme")
            won.append(f"r{i}")
        except RunAlreadyOpen:
            lost.append(f"r{i}")

    threads = [threading.Thread(target=admit, args=(i,)) for i in range(len(stores))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        assert len(won) == 1 and len(lost) == len(stores) - 1
        assert stores[0].open_run("wf", tenant="acme").id == won[0]
    finally:
        for s in stores:
            s.close()


def test_t2_answers_and_tool_results_are_reused_within_their_tenant_only(store_url: str) -> None:
    store = Store(store_url)
    try:
        answer = {
            "fingerprint": "f" * 64,
            "provider": "mock",
            "model": "m",
            "request": "{}",
            "response": "{}",
            "output": '{"text":"acme\'s"}',
            "created_at": 1.0,
        }
        tool = {"input_hash": "h" * 64, "function": "t:f", "output": '"acme"', "created_at": 1.0}
        store.checkpoint(
            Checkpoint(
                tenant="acme", answers=[AnswerRow(**answer)], tool_results=[ToolResultRow(**tool)]
            )
        )
        assert store.get_answers(["f" * 64], tenant="acme") == {"f" * 64: '{"text":"acme\'s"}'}
        assert store.get_answers(["f" * 64], tenant="beta") == {}
        assert store.get_answer("f" * 64, tenant="beta") is None
        assert store.get_tool_results(["h" * 64], tenant="beta") == {}
        # The same fingerprint in another tenant is a row of its own (primary key (tenant, fp)).
        store.checkpoint(
            Checkpoint(
                tenant="beta",
                answers=[AnswerRow(**{**answer, "output": '"beta"'})],
                tool_results=[ToolResultRow(**{**tool, "output": '"beta"'})],
            )
        )
        assert store.get_answers(["f" * 64], tenant="beta") == {"f" * 64: '"beta"'}
        assert store.get_answers(["f" * 64], tenant="acme") == {"f" * 64: '{"text":"acme\'s"}'}
        assert store.get_tool_results(["h" * 64], tenant="acme") == {"h" * 64: '"acme"'}
        with store.engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(t.answers)).scalar() == 2
    finally:
        store.close()


def test_t2_rows_written_without_their_tenant_are_refused(store_url: str) -> None:
    """The engine stamps the tenant on every row it writes; a row without one fails the
    write (the column has no default for new rows written by agac's bulk path)."""
    from agac.errors import StoreError

    store = Store(store_url)
    try:
        with pytest.raises(StoreError):
            store.checkpoint(
                Checkpoint(
                    usage=[
                        {  # a row given as columns, without its tenant
                            "run_id": "r",
                            "action": "a",
                            "unit_key": "k",
                            "attempt": 1,
                            "kind": "llm",
                            "provider": "mock",
                            "model": "m",
                            "tier": "live",
                            "status": "ok",
                            "created_at": 1.0,
                        }
                    ]
                )
            )
    finally:
        store.close()


# -- a store made before tenants -------------------------------------------------------------


def _upgrade_to(engine: sa.engine.Engine, revision: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(database.__file__).parent / "migrations"))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


SECRET = b"signing-secret"


def _old_store(engine: sa.engine.Engine) -> dict[str, str]:
    """A store at revision 0006 (before tenants) holding one of everything."""
    _upgrade_to(engine, "0006")
    now = time.time()
    run = {
        "workflow": "wf",
        "workflow_path": "wf.yml",
        "retry_of": None,
        "config": "{}",
        "config_hash": "h",
        "snapshot_id": "s",
        "fresh": False,
        "options": "{}",
        "error": None,
        "created_at": now,
        "updated_at": now,
        "ended_at": None,
    }
    proposal = {
        "id": "p1",
        "workflow": "wf",
        "action": "send",
        "unit_key": "r1",
        "seq": 0,
        "run_id": "open2",
        "subject": "s" * 64,
        "parent": None,
        "arguments": "{}",
        "policy_version": "1",
        "approvers": '["ann"]',
        "proposed_by": None,
        "expires_at": round(now + 3600, 3),
        "state": "pending",
        "decided_by": None,
        "decided_at": None,
        "reason": None,
        "decision_signature": None,
        "used_by": None,
        "used_at": None,
        "created_at": round(now, 3),
        "updated_at": now,
    }
    proposal["content_hash"] = content_hash(proposal)  # as agac signed it before tenants
    proposal["signature"] = sign(SECRET, "proposal:" + proposal["content_hash"])
    effect = {
        "workflow": "wf",
        "action": "send",
        "unit_key": "r1",
        "function": "t:f",
        "idempotent": True,
        "compensate": None,
        "run_id": "open2",
        "arguments": "{}",
        "receipt": None,
        "error": None,
        "resolution": None,
        "created_at": now,
        "updated_at": now,
    }
    meta = sa.MetaData()
    meta.reflect(engine)
    with engine.begin() as conn:
        conn.execute(
            meta.tables["runs"].insert(),
            [
                {**run, "id": "done1", "state": "succeeded", "ended_at": now},
                {**run, "id": "open1", "state": "waiting", "created_at": now - 10},
                {**run, "id": "open2", "state": "running"},
            ],
        )
        conn.execute(
            meta.tables["answers"]
            .insert()
            .values(
                fingerprint="f" * 64,
                provider="mock",
                model="m",
                request="{}",
                response="{}",
                output='{"text":"kept"}',
                created_at=now,
            )
        )
        conn.execute(
            meta.tables["tool_results"]
            .insert()
            .values(input_hash="h" * 64, function="t:f", output='"kept"', created_at=now)
        )
        conn.execute(
            meta.tables["effects"].insert(),
            [
                {**effect, "key": "d" * 64, "state": "succeeded", "receipt": '{"ok":1}'},
                {**effect, "key": "e" * 64, "state": "started"},
            ],
        )
        conn.execute(meta.tables["approvals"].insert().values(**proposal))
        conn.execute(
            meta.tables["batches"]
            .insert()
            .values(
                key="agac_old",
                workflow="wf",
                action="a",
                file="f",
                part=0,
                provider="openai",
                provider_batch_id="batch_1",
                state="running",
                raw_status=None,
                run_id="open2",
                collected_by=None,
                request_count=1,
                meta="{}",
                error=None,
                created_at=now,
                submitted_at=now,
                ended_at=None,
                deadline_at=None,
                updated_at=now,
            )
        )
        conn.execute(
            meta.tables["batch_items"]
            .insert()
            .values(
                batch_key="agac_old",
                custom_id="c1",
                workflow="wf",
                action="a",
                unit_key="r1",
                file="f",
                fingerprint="f" * 64,
                attempt=1,
                request="{}",
                status="pending",
                reason=None,
                detail=None,
            )
        )
        conn.execute(
            meta.tables["usage"]
            .insert()
            .values(
                run_id="done1",
                action="a",
                unit_key="r1",
                attempt=1,
                kind="llm",
                provider="mock",
                model="m",
                tier="live",
                input_tokens=1,
                cached_tokens=0,
                cache_write_tokens=0,
                output_tokens=1,
                cost_usd=0.5,
                latency_ms=1.0,
                status="ok",
                error=None,
                fingerprint="f" * 64,
                created_at=now,
            )
        )
    return {"effect_done": "d" * 64, "effect_in_flight": "e" * 64}


def test_t2_a_store_made_before_tenants_is_migrated_into_tenant_default(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        keys = _old_store(engine)
        assert upgrade(engine) == HEAD_REVISION == current_revision(engine)
        with engine.connect() as conn:
            for table in (
                "runs",
                "usage",
                "batches",
                "batch_items",
                "effects",
                "approvals",
                "answers",
                "tool_results",
            ):
                tenants = {r[0] for r in conn.execute(sa.text(f"SELECT tenant FROM {table}"))}
                assert tenants == {"default"}, table
    finally:
        engine.dispose()
    store = Store(store_url)
    try:
        # Two runs of one workflow were left open: the older ended, so the rule holds now.
        assert store.get_run("open1").state == "cancelled"
        assert "upgrade to tenants" in store.get_run("open1").error
        assert store.open_run("wf", tenant="default").id == "open2"
        assert store.get_run("done1").tenant == "default"
        with pytest.raises(RunAlreadyOpen):
            _admit(store, "new", "default")
        # Answers and tool results stay reusable, in tenant default only.
        assert store.get_answers(["f" * 64], tenant="default") == {"f" * 64: '{"text":"kept"}'}
        assert store.get_answers(["f" * 64], tenant="acme") == {}
        assert store.get_tool_results(["h" * 64], tenant="default") == {"h" * 64: '"kept"'}
        # E1 keys start with the tenant; an effect in flight remembers the key it was called
        # with, so it is never called again by itself under the new one.
        done = store.get_effect("default:" + keys["effect_done"])
        assert done is not None and done.state == "succeeded" and done.receipt == '{"ok":1}'
        flight = store.get_effect("default:" + keys["effect_in_flight"])
        assert json.loads(flight.resolution) == {"key_before_tenants": keys["effect_in_flight"]}
        assert store.get_effect(keys["effect_done"]) is None
        # A proposal signed before tenants still verifies; moved to another tenant it does not.
        proposal = store.get_proposal("p1")
        assert proposal.tenant == "default" and tampered(SECRET, proposal) is None
        with store.engine.begin() as conn:
            conn.execute(t.approvals.update().values(tenant="acme"))
        assert "content" in tampered(SECRET, store.get_proposal("p1"))
        # Batches and their items are tenant default's.
        assert [b.key for b in store.list_batches("wf", tenants=("default",), open_only=True)] == [
            "agac_old"
        ]
        assert store.list_batches("wf", tenants=("acme",)) == []
        assert [i.custom_id for i in store.unit_items("wf", "a", ["r1"], tenant="default")] == [
            "c1"
        ]
        assert store.unit_items("wf", "a", ["r1"], tenant="acme") == []
    finally:
        store.close()


def test_t2_the_services_reads_keep_to_the_callers_tenants(store_url: str) -> None:
    """What the pages list — runs, workflow names, a run's batches, cost over time — is
    limited in SQL to the caller's tenants, with two tenants on the same workflow."""
    store = Store(store_url)
    now = time.time()
    try:
        for run_id, tenant in (("a1", "acme"), ("b1", "beta")):
            _admit(store, run_id, tenant)
            with store.engine.begin() as conn:
                conn.execute(
                    t.batches.insert().values(
                        key=f"agac_{run_id}",
                        workflow="wf",
                        action="a",
                        file="f",
                        part=0,
                        provider="openai",
                        provider_batch_id=f"batch_{run_id}",
                        state="running",
                        raw_status=None,
                        run_id=run_id,
                        collected_by=None,
                        request_count=1,
                        meta="{}",
                        error=None,
                        created_at=now,
                        submitted_at=now,
                        ended_at=None,
                        deadline_at=None,
                        updated_at=now,
                        tenant=tenant,
                    )
                )
                conn.execute(
                    t.usage.insert().values(
                        run_id=run_id,
                        action="a",
                        unit_key="r1",
                        attempt=1,
                        kind="llm",
                        provider="mock",
                        model="m",
                        tier="live",
                        input_tokens=1,
                        cached_tokens=0,
                        cache_write_tokens=0,
                        output_tokens=1,
                        cost_usd=0.5 if tenant == "acme" else 7.0,
                        latency_ms=1.0,
                        status="ok",
                        error=None,
                        fingerprint=None,
                        created_at=now,
                        origin=None,
                        tenant=tenant,
                    )
                )
        rows, total = store.runs_page(("acme",))
        assert [r.id for r in rows] == ["a1"] and total == 1
        assert store.runs_page(("acme", "beta"))[1] == 2
        assert store.runs_page(())[1] == 0
        assert store.workflow_names(("beta",)) == ["wf"] and store.workflow_names(()) == []
        # a run's page shows its own tenant's batches of the workflow, never the other's
        assert [b.key for b in store.run_batches("a1", "wf", "acme")] == ["agac_a1"]
        assert [b.key for b in store.run_batches("b1", "wf", "beta")] == ["agac_b1"]
        series = store.cost_series(("acme",), since=now - 86400, bucket=86400)
        assert [float(s.cost) for s in series] == [0.5]
    finally:
        store.close()
