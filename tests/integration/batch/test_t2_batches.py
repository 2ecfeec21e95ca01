"""T2 with batches (B0): a batch belongs to the tenant of the run that sent it. Two tenants
running the same batch workflow over the same records each send their own batch, adopt
and collect only their own, and a run cancels only its own tenant's batches. Another
tenant's batch is "not found" by ``agac batch …``."""

from __future__ import annotations

from pathlib import Path

import pytest
from batch_support import WORKFLOW, creates, make, ops

from agac import api
from agac.api import batches
from agac.emulator.testing import RunningEmulator
from agac.errors import NotFound


def _run(root: Path, tenant: str, **options: object) -> dict:
    return dict(api.run(WORKFLOW, root, tenant=tenant, **options).summary)


def test_t2_b0_each_tenant_sends_adopts_and_cancels_only_its_own_batches(
    project: Path, emulator: RunningEmulator
) -> None:
    make(project, "openai", {"a": 3})
    acme = _run(project, "acme")
    assert acme["state"] == "waiting" and acme["actions"]["classify"]["batches_out"] == 1
    # beta runs the same workflow over the same records: acme's batch out holds exactly the
    # requests beta needs, yet beta never adopts it — it sends its own.
    beta = _run(project, "beta")
    assert beta["actions"]["classify"]["batches_out"] == 1
    assert creates(emulator.stats(), "openai") == 2
    mine = {x: batches.list_batches(WORKFLOW, project, tenant=x) for x in ("acme", "beta")}
    assert [b["tenant"] for b in mine["acme"]] == ["acme"]
    assert [b["tenant"] for b in mine["beta"]] == ["beta"]
    assert mine["acme"][0]["run_id"] == acme["run_id"]
    assert batches.list_batches(WORKFLOW, project) == []  # tenant default has none
    theirs = mine["acme"][0]["batch_id"]
    with pytest.raises(NotFound):
        batches.batch_status(WORKFLOW, project, batch_id=theirs, tenant="beta")
    with pytest.raises(NotFound):
        batches.cancel(WORKFLOW, project, batch_id=theirs, tenant="beta")
    with pytest.raises(NotFound):
        batches.retrieve(WORKFLOW, project, batch_id=theirs, tenant="beta", sink=print)
    assert batches.batch_status(WORKFLOW, project, batch_id=theirs, tenant="acme")["open"]
    # beta starts afresh: it cancels its own batch out at the provider, never acme's.
    fresh = _run(project, "beta", fresh=True)
    assert ops(emulator.stats(), "openai").get("batch.cancel", 0) == 1
    assert batches.batch_status(WORKFLOW, project, batch_id=theirs, tenant="acme")["open"]
    assert fresh["actions"]["classify"]["batches_out"] == 1
    assert creates(emulator.stats(), "openai") == 3
    emulator.advance(120)
    done = {x: _run(project, x) for x in ("acme", "beta")}
    for tenant, s in done.items():
        assert s["state"] == "succeeded" and s["tenant"] == tenant
        assert s["actions"]["classify"]["answered"] == 3
    assert done["acme"]["run_id"] == acme["run_id"]  # acme's run collected its own batch
    # Each tenant paid once for each of its requests (2 actions x 3 records), and beta paid
    # again for every request acme had asked: no tenant learns from another's answers.
    stats = emulator.stats()
    assert stats["answered"] == 12 and stats["duplicate_answers"] == 6


def test_t2_cancelling_a_run_cancels_only_its_tenants_batches(
    project: Path, emulator: RunningEmulator
) -> None:
    make(project, "openai", {"a": 2})
    acme = _run(project, "acme")
    _run(project, "beta")
    with pytest.raises(NotFound):
        api.cancel(acme["run_id"], project, tenant="beta")
    cancelled = api.cancel(WORKFLOW, project, tenant="beta").summary
    assert cancelled["state"] == "cancelled" and cancelled["tenant"] == "beta"
    assert ops(emulator.stats(), "openai").get("batch.cancel", 0) == 1
    assert api.status(acme["run_id"], project, tenant="acme")["state"] == "waiting"
    emulator.advance(120)
    assert _run(project, "acme")["state"] == "succeeded"
