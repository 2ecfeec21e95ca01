"""T2 on /workers: a user sees the live workers and only what they hold for the user's own
tenants (PostgreSQL: workers need it)."""

from __future__ import annotations

import os
from pathlib import Path

from service_support import running_service, team_project

from agac import api
from agac.api import team
from agac.api.identity import Principal


def test_t2_workers_page_hides_other_tenants_holdings(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    root = team_project(tmp_path / "pg", agac_yml=f"identity: login\nstore: {fresh_pg_database}\n")
    submitted = api.submit("replies", root)
    with running_service(root) as service:
        store = service.store
        store.register_worker("w1", host="h", pid=os.getpid(), concurrency=4, ttl=60)
        claim = store.claim_shard(worker="w1", host="h", pid=os.getpid(), ttl=60)
        assert claim is not None and claim.run_id == submitted["run_id"]
        mine = team.workers_for(store, Principal("ann", frozenset({"default"})))
        assert [h["run_id"] for h in mine[0]["holds"]] == [submitted["run_id"]]
        other = team.workers_for(store, Principal("eve", frozenset({"other"})))
        assert other[0]["worker_id"] == "w1" and other[0]["holds"] == []
        ann_page = service.browser("ann").get("/workers").text
        eve_page = service.browser("eve").get("/workers").text
        assert submitted["run_id"][:12] in ann_page and "w1" in ann_page
        assert submitted["run_id"][:12] not in eve_page and "w1" in eve_page
