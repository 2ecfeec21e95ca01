"""T5: the JSON API as docs/guarantees.md, Teams names it, with its status codes; T3: permissions are
checked again when a decision is applied and when the unit acts; T2: another tenant's
object is 404, never 403."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import sqlalchemy as sa
from service_support import CHEAP, PASSWORD, WORKFLOW, Service, running_service, team_project

from agac import api
from agac.api import identity
from agac.store import tables as t


def _pending(client: httpx.Client) -> list[dict]:
    r = client.get("/api/v1/approvals")
    assert r.status_code == 200, r.text
    return r.json()["approvals"]


def test_t5_runs_list_and_summary(service: Service) -> None:
    with service.api("bob") as bob:
        listing = bob.get("/api/v1/runs").json()
        assert listing["page"] == 1 and listing["per_page"] == 50 and listing["total"] == 1
        run = listing["runs"][0]
        assert set(run) >= {
            "id",
            "workflow",
            "tenant",
            "state",
            "counts",
            "cost_usd",
            "started",
            "ended",
        }
        assert run["workflow"] == "replies" and run["tenant"] == "default"
        assert run["state"] == "awaiting_approval" and run["counts"]["answered"] == 2
        summary = bob.get(f"/api/v1/runs/{run['id']}").json()
        assert summary["tenant"] == "default" and summary["run_id"] == run["id"]
        assert summary["actions"]["send"]["pending"] == 2
        assert bob.get("/api/v1/runs?state=succeeded").json()["total"] == 0
        assert bob.get("/api/v1/runs?state=bogus").status_code == 422
        assert bob.get("/api/v1/runs?page=0").status_code == 422
        assert bob.get("/api/v1/runs/nope").json()["error"]["code"] == "not_found"


def test_t5_runs_page_50_at_a_time(tmp_path: Path, service: Service) -> None:
    runs = service.store
    base = runs.list_runs(limit=1)[0]
    for i in range(120):
        runs.create_run(
            id=f"bulk{i:04d}",
            workflow="bulk",
            workflow_path=base.workflow_path,
            retry_of=None,
            config=base.config,
            config_hash=base.config_hash,
            snapshot_id=base.snapshot_id,
            fresh=False,
            settings=base.settings,
            tenant=base.tenant,
        )
        runs.end_run(f"bulk{i:04d}", "succeeded")
    with service.api("bob") as bob:
        first = bob.get("/api/v1/runs").json()
        assert first["total"] == 121 and first["pages"] == 3 and len(first["runs"]) == 50
        assert first["runs"][0]["id"] == "bulk0119"
        third = bob.get("/api/v1/runs?page=3").json()
        assert len(third["runs"]) == 21 and third["runs"][-1]["id"] == base.id


def test_t5_t2_another_tenants_objects_are_404_never_403(service: Service) -> None:
    run_id = service.store.list_runs(limit=1)[0].id
    with service.api("ann") as ann:
        proposal = _pending(ann)[0]["id"]
    with service.api("eve") as eve:  # an approver in tenant "other"
        assert eve.get("/api/v1/runs").json()["total"] == 0
        assert eve.get("/api/v1/approvals").json()["approvals"] == []
        for path in (f"/api/v1/runs/{run_id}", f"/api/v1/runs/{run_id}/events"):
            r = eve.get(path)
            assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", path
        r = eve.post(f"/api/v1/approvals/{proposal}/approve", json={})
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    eve_pages = service.browser("eve")
    assert eve_pages.get(f"/runs/{run_id}").status_code == 404
    assert eve_pages.get(f"/records/{run_id}/c1").status_code == 404
    assert eve_pages.get(f"/runs/{run_id}/live").status_code == 404
    assert run_id not in eve_pages.get("/runs").text
    assert proposal not in eve_pages.get("/approvals?all=1").text
    assert "replies" not in eve_pages.get("/cost").text
    assert eve_pages.post(f"/approvals/{proposal}/approve", {}).status_code == 404


def test_t5_a3_approve_reject_revise_with_their_codes(service: Service) -> None:
    with service.api("ann") as ann, service.api("bob") as bob:
        first, second = _pending(ann)
        assert first["may_decide"] and not _pending(bob)[0]["may_decide"]
        refused = bob.post(f"/api/v1/approvals/{first['id']}/approve", json={})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_an_approver"
        assert ann.post(f"/api/v1/approvals/{first['id']}/reject", json={}).status_code == 422
        assert (
            ann.post(f"/api/v1/approvals/{first['id']}/approve", content=b"{nope").status_code
            == 422
        )
        assert ann.post(f"/api/v1/approvals/{first['id']}/approve", json=[1]).status_code == 422
        assert (
            ann.post(f"/api/v1/approvals/{first['id']}/approve", json={"x": 1}).status_code == 422
        )
        assert (
            ann.post(f"/api/v1/approvals/{first['id']}/revise", json={"set": {}}).status_code == 422
        )
        ok = ann.post(f"/api/v1/approvals/{first['id']}/approve", json={})
        assert ok.status_code == 200 and ok.json()["state"] == "approved"
        assert ok.json()["decided_by"] == "ann"
        replayed = ann.post(f"/api/v1/approvals/{first['id']}/approve", json={})
        assert replayed.status_code == 409
        assert replayed.json()["error"]["code"] == "approval_replayed"
        revised = ann.post(
            f"/api/v1/approvals/{second['id']}/revise",
            json={"set": {"draft.text": "Sorry, a new one is on its way"}},
        )
        assert revised.status_code == 201, revised.text
        new = revised.json()
        assert new["revises"] == second["id"] and new["state"] == "pending"
        stale = ann.post(f"/api/v1/approvals/{second['id']}/approve", json={})
        assert stale.status_code == 409 and stale.json()["error"]["code"] == "approval_stale"
        listed = {p["id"]: p for p in _pending(ann)}
        assert listed[new["id"]]["diff"] and any(
            kind == "add" for kind, _ in listed[new["id"]]["diff"]
        )
        rejected = ann.post(f"/api/v1/approvals/{new['id']}/reject", json={"reason": "not today"})
        assert rejected.status_code == 200 and rejected.json()["reason"] == "not today"
    done = api.run("replies", service.ctx.project.root)
    assert done.summary["actions"]["send"] == {
        **done.summary["actions"]["send"],
        "answered": 1,
        "failed": 1,
    }


def test_t5_altered_decisions_are_409(service: Service) -> None:
    with service.api("ann") as ann:
        first = _pending(ann)[0]
        with service.store.engine.begin() as conn:
            conn.execute(
                t.approvals.update()
                .where(t.approvals.c.id == first["id"])
                .values(arguments=json.dumps({"draft": {"text": "wire me $1000"}}))
            )
        altered = ann.post(f"/api/v1/approvals/{first['id']}/approve", json={})
        assert altered.status_code == 409 and altered.json()["error"]["code"] == "approval_altered"


def test_t5_expired_decisions_are_409(tmp_path: Path) -> None:
    root = team_project(
        tmp_path / "short", workflow=WORKFLOW.replace("expires_in: 24h", "expires_in: 1s")
    )
    assert api.run("replies", root).exit_code == 75
    with running_service(root) as service, service.api("ann") as ann:
        first = _pending(ann)[0]
        time.sleep(max(first["expires_at"] - time.time(), 0) + 0.05)  # the engine's own clock
        expired = ann.post(f"/api/v1/approvals/{first['id']}/approve", json={})
        assert expired.status_code == 409 and expired.json()["error"]["code"] == "approval_expired"


def test_t3_a_user_disabled_or_removed_from_the_group_after_approving_is_refused_at_the_act(
    service: Service,
) -> None:
    identity.add_user(
        service.store, "cid", PASSWORD, tenants=["default"], groups=["leads"], passwords=CHEAP
    )
    with service.api("ann") as ann, service.api("cid") as cid:
        first, second = _pending(ann)
        assert ann.post(f"/api/v1/approvals/{first['id']}/approve", json={}).status_code == 200
        assert cid.post(f"/api/v1/approvals/{second['id']}/approve", json={}).status_code == 200
    identity.change_user(service.store, "ann", active=False)  # disabled since
    identity.change_user(service.store, "cid", groups=[])  # out of the group since
    result = api.run("replies", service.ctx.project.root)
    assert result.exit_code == 75  # neither acted: both approvals revoked, new proposals made
    states = {
        p["id"]: p for p in api.approvals_list("replies", service.ctx.project.root, every=True)
    }
    assert states[first["id"]]["state"] == "revoked" and states[second["id"]]["state"] == "revoked"
    assert "ann is disabled" in states[first["id"]]["reason"]
    assert "cid is not an approver" in states[second["id"]]["reason"]
    events = [e["kind"] for e in api.events(result.summary["run_id"], service.ctx.project.root)]
    assert events.count("approval_revoked") == 2 and "approval_applied" not in events


def test_t3_decision_refused_when_applied_to_a_user_out_of_the_tenant(service: Service) -> None:
    with service.api("ann") as ann:
        first = _pending(ann)[0]
        identity.change_user(service.store, "ann", tenants=["other"])  # moved to another tenant
        r = ann.post(f"/api/v1/approvals/{first['id']}/approve", json={})
        assert r.status_code == 404  # the run is no longer hers to see


def test_t5_events_stream_is_sse_and_resumes_after_last_event_id(service: Service) -> None:
    run_id = service.store.list_runs(limit=1)[0].id
    all_events = api.events(run_id, service.ctx.project.root)
    with service.api("bob") as bob:
        # the run is not final: read a bounded part of the stream
        seen: list[tuple[int, str]] = []
        with bob.stream("GET", f"/api/v1/runs/{run_id}/events") as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            event_id = None
            for line in r.iter_lines():
                if line.startswith("id: "):
                    event_id = int(line[4:])
                elif line.startswith("event: ") and event_id is not None:
                    seen.append((event_id, line[7:]))
                if len(seen) == len(all_events):
                    break
        assert seen == [(e["id"], e["kind"]) for e in all_events]
        middle = all_events[len(all_events) // 2]["id"]
        resumed: list[int] = []
        with bob.stream(
            "GET", f"/api/v1/runs/{run_id}/events", headers={"Last-Event-ID": str(middle)}
        ) as r:
            for line in r.iter_lines():
                if line.startswith("id: "):
                    resumed.append(int(line[4:]))
                if resumed and resumed[-1] == all_events[-1]["id"]:
                    break
        assert resumed == [e["id"] for e in all_events if e["id"] > middle]


def test_t5_events_stream_ends_when_the_run_is_final_and_stops_for_a_revoked_token(
    service: Service,
) -> None:
    run_id = service.store.list_runs(limit=1)[0].id
    made = identity.create_token(service.store, "ann", clock=service.clock)
    kinds: list[str] = []

    def read() -> None:
        with (
            httpx.Client(base_url=service.url, timeout=240) as c,
            c.stream(
                "GET",
                f"/api/v1/runs/{run_id}/events",
                headers={"Authorization": f"Bearer {made['token']}"},
            ) as r,
        ):
            for line in r.iter_lines():
                if line.startswith("event: "):
                    kinds.append(line[7:])

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.3)
    identity.revoke_token(service.store, made["id"], clock=service.clock)
    reader.join(10)
    assert not reader.is_alive(), "a revoked token's stream kept going"
    with service.api("ann") as ann:
        for p in _pending(ann):
            assert ann.post(f"/api/v1/approvals/{p['id']}/approve", json={}).status_code == 200
    assert api.run("replies", service.ctx.project.root).exit_code == 0
    with service.api("ann") as ann, ann.stream("GET", f"/api/v1/runs/{run_id}/events") as r:
        lines = list(r.iter_lines())  # ends by itself: the run is final
    assert "event: run_ended" in lines


def test_t5_the_users_table_is_never_in_the_api(service: Service) -> None:
    with service.api("ann") as ann:
        body = ann.get("/api/v1/runs").text + ann.get("/api/v1/approvals").text
    with service.store.engine.connect() as conn:
        hashes = [r.password_hash for r in conn.execute(sa.select(t.users)).all()]
    assert all(h not in body for h in hashes) and "argon2" not in body
