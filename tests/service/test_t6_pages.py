"""T6: what a person sees — each page shows what docs/guarantees.md, Teams names, and the live streams
send server-rendered fragments as the store changes."""

from __future__ import annotations

import itertools
import re
import threading
import time
from pathlib import Path

from service_support import PASSWORD, Service, running_service, team_project

from agac import api
from agac.api import identity


def test_t6_sign_in_returns_to_the_page_asked_for(service: Service) -> None:
    b = service.browser()
    first = b.get("/cost?days=7")
    assert (
        first.status_code == 303 and first.headers["location"] == "/login?next=%2Fcost%3Fdays%3D7"
    )
    b.get(first.headers["location"])
    wrong = b.post(
        "/login", {"username": "ann", "password": "nope nope nope", "next": "/cost?days=7"}
    )
    assert 'name="next" value="/cost?days=7"' in wrong.text
    ok = b.post("/login", {"username": "ann", "password": PASSWORD, "next": "/cost?days=7"})
    assert ok.headers["location"] == "/cost?days=7"
    evil = service.browser()
    evil.get("/login")
    r = evil.post("/login", {"username": "ann", "password": PASSWORD, "next": "//evil.example/x"})
    assert r.headers["location"] == "/runs"  # no open redirect


def test_t6_runs_run_record_approvals_cost_workers(service: Service) -> None:
    run_id = service.store.list_runs(limit=1)[0].id
    bob = service.browser("bob")
    runs = bob.get("/runs").text
    assert f'id="run-{run_id}"' in runs and "awaiting approval" in runs and "2/4" in runs
    assert 'data-live="/runs/live?' in runs
    run = bob.get(f"/runs/{run_id}").text
    for part in (
        'id="bars"',
        'id="failures"',
        'id="batches"',
        'id="cost"',
        "draft",
        "send",
        "2 proposals await a decision",
        "mock/m",
        f'data-live="/runs/{run_id}/live?after=',
    ):
        assert part in run, part
    record = bob.get(f"/records/{run_id}/c1").text
    assert "late parcel" in record and "draft" in record and "Output" in record
    assert bob.get(f"/records/{run_id}/nope").status_code == 404
    approvals = bob.get("/approvals").text
    assert approvals.count('class="proposal"') == 2 and "Exact arguments" in approvals
    assert "You are not an approver" in approvals and 'class="approve"' not in approvals
    ann_approvals = service.browser("ann").get("/approvals").text
    assert ann_approvals.count('class="approve"') == 2
    cost = bob.get("/cost").text
    assert "<svg" in cost and "replies · mock/m" in cost and 'class="s0"' in cost
    workers = bob.get("/workers").text
    assert "PostgreSQL" in workers  # SQLite: no workers; says why


def test_t6_approve_reject_revise_from_the_queue(service: Service) -> None:
    ann = service.browser("ann")
    ann.get("/approvals")
    first, second = api.approvals_list("replies", service.ctx.project.root)
    ok = ann.post(f"/approvals/{first['id']}/approve", {})
    assert ok.status_code == 303 and ok.headers["location"].startswith("/approvals?done=approved")
    again = ann.post(f"/approvals/{first['id']}/approve", {})
    assert again.status_code == 409 and "already decided" in again.text
    no_reason = ann.post(f"/approvals/{second['id']}/reject", {"reason": " "})
    assert no_reason.status_code == 422
    revised = ann.post(f"/approvals/{second['id']}/revise", {"changes": "draft.text=Sorry!\n"})
    assert revised.status_code == 303
    page = ann.get("/approvals").text
    assert "What the revision changed" in page and "Sorry!" in page
    bob = service.browser("bob")
    bob.get("/approvals")
    new = api.approvals_list("replies", service.ctx.project.root)[0]
    refused = bob.post(f"/approvals/{new['id']}/approve", {})
    assert refused.status_code == 403 and "not an approver" in refused.text


def _first_swap(service: Service, path: str, action: threading.Thread | None = None) -> str:
    b = service.browser("ann")
    found: list[str] = []
    with b.http.stream("GET", path) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        if action is not None:
            action.start()
        data: list[str] = []
        for line in r.iter_lines():
            if line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                found.append("\n".join(data))
                break
    return found[0]


def test_t6_runs_list_rows_move_live(service: Service) -> None:
    run_id = service.store.list_runs(limit=1)[0].id
    after = service.store.last_event_id()
    first = api.approvals_list("replies", service.ctx.project.root)[0]

    def decide() -> None:
        time.sleep(0.3)
        api_client = service.api("ann")
        api_client.post(f"/api/v1/approvals/{first['id']}/approve", json={})

    row = _first_swap(service, f"/runs/live?after={after}", threading.Thread(target=decide))
    assert row.startswith(f'<tr id="run-{run_id}">') and "awaiting approval" in row


def test_t6_progress_events_reach_the_run_page_as_fragments(tmp_path: Path) -> None:
    rows = [{"id": f"r{i}", "text": f"m {i}"} for i in range(400)]
    root = team_project(
        tmp_path / "p",
        rows=rows,
        workflow="""\
name: replies
input: {path: data/, id_field: id}
defaults: {model: mock/m, max_concurrency: 4}
actions:
  - name: draft
    prompt: "Reply to: {{ source.text }}"
""",
    )
    # at least 5 s of calls (400 x 50 ms / 4 at a time): several progress events on any machine
    (root / "agac.yml").write_text("identity: login\nproviders:\n  mock: {latency_ms: 50}\n")
    with running_service(root) as service:
        runner = threading.Thread(target=api.run, args=("replies", root))
        runner.start()
        while not service.store.list_runs(limit=1):
            time.sleep(0.02)
        run_id = service.store.list_runs(limit=1)[0].id
        b = service.browser("ann")
        answered: list[int] = []
        ended = False
        with b.http.stream("GET", f"/runs/{run_id}/live?after=0") as r:
            data: list[str] = []
            for line in r.iter_lines():
                if line.startswith("data: "):
                    data.append(line[6:])
                elif line.startswith("event: end"):
                    ended = True
                elif line == "" and data:
                    html = "\n".join(data)
                    data = []
                    m = re.search(
                        r'<td>draft</td>.*?<td class="num">([\d,]+)</td>', html, re.DOTALL
                    )
                    if m:
                        answered.append(int(m.group(1).replace(",", "")))
                if ended:
                    break
        runner.join(60)
        events = [
            e for e in service.store.iter_events(run_id, 0, limit=10_000) if e.kind == "progress"
        ]
    assert ended and answered[-1] == 400
    assert answered == sorted(answered) and len(set(answered)) >= 3, answered
    assert len(events) >= 2  # at most one a second while it ran, and one at the end
    gaps = [b.created_at - a.created_at for a, b in itertools.pairwise(events[:-1])]
    assert all(g >= 0.9 for g in gaps), gaps


def test_t6_a_disabled_users_live_stream_stops(service: Service) -> None:
    run_id = service.store.list_runs(limit=1)[0].id
    b = service.browser("bob")
    with b.http.stream("GET", f"/runs/{run_id}/live") as r:
        lines = r.iter_lines()
        assert next(lines).startswith("retry:")  # the stream is open for bob
        identity.change_user(service.store, "bob", active=False)
        started = time.monotonic()
        rest = list(lines)
    assert "event: end" in rest and "data: signed out" in rest
    assert time.monotonic() - started < 60  # the run goes on: only the check ends the stream


def test_t6_a_progress_event_older_than_the_page_never_moves_the_bars_back() -> None:
    from agac.service.live import _bars_from

    shown = {"draft": {"answered": 120, "failed": 3, "skipped": 0, "cost_usd": 0.5}}
    event = {
        "scope": "run",
        "actions": {
            "draft": {"records": 400, "answered": 110, "failed": 3, "skipped": 0, "cost_usd": 0.4}
        },
    }
    bars = _bars_from(event, shown)["draft"]
    assert (bars["answered"], bars["failed"], bars["pending"], bars["cost_usd"]) == (
        120,
        3,
        277,
        0.5,
    )
    newer = {
        "scope": "run",
        "actions": {
            "draft": {"records": 400, "answered": 150, "failed": 3, "skipped": 0, "cost_usd": 0.6}
        },
    }
    assert _bars_from(newer, {"draft": bars})["draft"]["answered"] == 150
