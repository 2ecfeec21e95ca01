"""T2: a run keeps its tenant, and two tenants running the same workflow over the same
records never touch each other's runs, answers, effects, proposals or cost. Every kind of
object of another tenant is "not found" through the library — with the very words used
for an object that does not exist (never "forbidden")."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import rows

from agac import api
from agac.errors import ConfigError, NotFound, UsageError
from agac.store import tables as t
from agac.store.repository import Store
from agac.testing import write_project

WF = """
name: wf
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 4, retry: {max_attempts: 2, backoff: {initial: 10ms, max: 20ms}}}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [classify]
    function: tools:send
    effect: {idempotent: false, compensate: tools:undo}
    approval: {approvers: [ann], expires_in: 1h}
"""

TOOLS = """
import json

def send(inputs, ctx):
    with open("calls.log", "a") as f:
        f.write(json.dumps({"key": ctx.idempotency_key, "tenant": ctx.tenant,
                            "record": ctx.record_key}) + "\\n")
    return {"sent": inputs["source"]["id"]}

def undo(inputs, ctx):
    return {"recalled": inputs["receipt"]["sent"]}
"""

N = 6


class Person:
    """A caller as the service sees it: the library needs only its tenants."""

    def __init__(self, *tenants: str) -> None:
        self.tenants = frozenset(tenants)


def _make(root: Path) -> None:
    write_project(root, WF, data={"data/a.jsonl": rows(N)}, files={"tools.py": TOOLS})


def _calls(root: Path) -> list[dict[str, Any]]:
    log = root / "calls.log"
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _at_once(root: Path, *tenants: str) -> dict[str, Any]:
    """``agac run wf --tenant T`` for each tenant, all at the same time."""
    results: dict[str, Any] = {}
    errors: list[BaseException] = []
    gate = threading.Barrier(len(tenants))

    def go(tenant: str) -> None:
        gate.wait()
        try:
            results[tenant] = api.run("wf", root, tenant=tenant)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(x,)) for x in tenants]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    return results


def test_t2_two_tenants_run_the_same_workflow_at_once_and_never_touch_each_other(
    project: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _make(project)
    monkeypatch.setenv("AGAC_SECRET", "tenants-secret")
    first = _at_once(project, "acme", "beta")
    ids = {x: r.summary["run_id"] for x, r in first.items()}
    for tenant, result in first.items():
        s = result.summary
        assert result.exit_code == 75 and s["state"] == "awaiting_approval"
        assert s["tenant"] == tenant and result.summary["next"].endswith(f"--tenant {tenant}")
        # Each tenant paid for its own answers: nothing reused from the other's cache.
        assert s["actions"]["classify"]["calls"] == N and s["actions"]["classify"]["reused"] == 0
    # Proposals: each tenant sees its own, and only its own.
    mine = {x: api.approvals_list("wf", project, tenant=x) for x in ("acme", "beta")}
    assert {p["tenant"] for p in mine["acme"]} == {"acme"} and len(mine["acme"]) == N
    assert {p["tenant"] for p in mine["beta"]} == {"beta"} and len(mine["beta"]) == N
    assert {p["run_id"] for p in mine["acme"]} == {ids["acme"]}
    assert api.approvals_list("wf", project) == []  # tenant default has none
    with pytest.raises(NotFound):
        api.approve(mine["acme"][0]["id"], project, who="ann", tenant="beta")
    for p in mine["acme"]:
        api.approve(p["id"], project, who="ann", tenant="acme")
    # acme acts; beta's units still wait on their own proposals and call nothing.
    done = api.run("wf", project, tenant="acme")
    assert done.summary["state"] == "succeeded" and done.summary["run_id"] == ids["acme"]
    assert {c["tenant"] for c in _calls(project)} == {"acme"} and len(_calls(project)) == N
    assert all(c["key"].startswith("acme:") for c in _calls(project))
    still = api.run("wf", project, tenant="beta")
    assert still.exit_code == 75 and still.summary["run_id"] == ids["beta"]
    assert still.summary["actions"]["send"]["pending"] == N
    for p in api.approvals_list("wf", project, tenant="beta"):
        api.approve(p["id"], project, who="ann", tenant="beta")
    assert api.run("wf", project, tenant="beta").summary["state"] == "succeeded"
    # Effects (E1): the same record and arguments are one effect per tenant, keyed by it.
    calls = _calls(project)
    assert len(calls) == 2 * N
    assert {c["key"].partition(":")[2] for c in calls if c["tenant"] == "acme"} == {
        c["key"].partition(":")[2] for c in calls if c["tenant"] == "beta"
    }
    effects = {x: api.effects_list("wf", project, tenant=x) for x in ("acme", "beta")}
    assert {e["tenant"] for e in effects["acme"]} == {"acme"} and len(effects["acme"]) == N
    assert {e["key"] for e in effects["acme"]}.isdisjoint({e["key"] for e in effects["beta"]})
    # Cost and the ledger: each run's usage is its tenant's.
    for tenant in ("acme", "beta"):
        cost = api.cost("wf", project, tenant=tenant)
        assert cost["tenant"] == tenant and cost["run_id"] == ids[tenant]
        assert sum(r["calls"] for r in cost["rows"] if r["action"] == "classify") == N
    store = Store(store_url)
    try:
        with store.engine.connect() as conn:
            per = dict(
                conn.execute(
                    t.usage.select()
                    .with_only_columns(t.usage.c.tenant, t.usage.c.run_id)
                    .distinct()
                ).all()
            )
            answers = conn.execute(t.answers.select().with_only_columns(t.answers.c.tenant)).all()
    finally:
        store.close()
    assert per == {"acme": ids["acme"], "beta": ids["beta"]}
    assert sorted(a[0] for a in answers) == ["acme"] * N + ["beta"] * N
    # Runs list: each tenant its own run; the tenant never changes.
    listed = {x: api.list_runs("wf", project, tenant=x) for x in ("acme", "beta", "default")}
    assert [(r["run_id"], r["tenant"]) for r in listed["acme"]] == [(ids["acme"], "acme")]
    assert [(r["run_id"], r["tenant"]) for r in listed["beta"]] == [(ids["beta"], "beta")]
    assert listed["default"] == []
    events = api.events(ids["acme"], project, tenant="acme")
    assert {e["tenant"] for e in events} == {"acme"}
    assert events[0]["kind"] == "run_admitted" and events[0]["data"]["tenant"] == "acme"


def test_t2_a_later_run_reuses_its_own_tenants_answers_only(project: Path) -> None:
    write_project(project, WF.split("  - name: send")[0], data={"data/a.jsonl": rows(N)})
    assert api.run("wf", project, tenant="acme").summary["actions"]["classify"]["calls"] == N
    again = api.run("wf", project, tenant="acme", new=True).summary["actions"]["classify"]
    assert again["calls"] == 0 and again["reused"] == N  # S5 within the tenant
    other = api.run("wf", project, tenant="beta").summary["actions"]["classify"]
    assert other["calls"] == N and other["reused"] == 0  # never from another tenant
    assert api.plan("wf", project, tenant="acme")["actions"]["classify"]["reusable"] == N
    assert api.plan("wf", project, tenant="gamma")["actions"]["classify"]["reusable"] == 0


def _object_refs(project: Path) -> dict[str, Any]:
    """One of every object kind in tenant acme: a run, its records, a proposal, an effect."""
    _make(project)
    paused = api.run("wf", project, tenant="acme")
    run_id = paused.summary["run_id"]
    proposals = api.approvals_list("wf", project, tenant="acme")
    for p in proposals:
        api.approve(p["id"], project, who="ann", tenant="acme")
    api.run("wf", project, tenant="acme")
    effect = api.effects_list("wf", project, tenant="acme")[0]
    return {"run": run_id, "proposal": proposals[0]["id"], "effect": effect["id"]}


LOOKUPS = {
    "status": lambda p, ref, **k: api.status(ref["run"], p, **k),
    "events": lambda p, ref, **k: api.events(ref["run"], p, **k),
    "cost": lambda p, ref, **k: api.cost(ref["run"], p, **k),
    "records list": lambda p, ref, **k: api.list_records("wf", p, run_ref=ref["run"], **k),
    "records show": lambda p, ref, **k: api.record_session("r00000", p, run_ref=ref["run"], **k),
    "export": lambda p, ref, **k: list(
        api.export_rows("wf", "classify", p, run_ref=ref["run"], **k)
    ),
    "cancel": lambda p, ref, **k: api.cancel(ref["run"], p, **k),
    "approvals show": lambda p, ref, **k: api.approvals_show(ref["proposal"], p, **k),
    "approve": lambda p, ref, **k: api.approve(ref["proposal"], p, who="ann", **k),
    "reject": lambda p, ref, **k: api.reject(ref["proposal"], "no", p, who="ann", **k),
    "revise": lambda p, ref, **k: api.revise(ref["proposal"], ["x=1"], p, who="ann", **k),
    "effects resolve": lambda p, ref, **k: api.effects_resolve(ref["effect"], True, p, **k),
    "effects compensate": lambda p, ref, **k: api.effects_compensate(ref["effect"], p, **k),
}


def _message(call: Any) -> str:
    with pytest.raises(NotFound) as info:
        call()
    return info.value.message


def test_t2_every_object_of_another_tenant_is_not_found_through_the_library(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGAC_SECRET", "tenants-secret")
    refs = _object_refs(project)
    missing = {"run": "feedc0ffee00", "proposal": "feedc0ffee00", "effect": "feedc0ffee00"}
    for name, call in LOOKUPS.items():
        # acme's object, asked for by tenant beta (argument), by AGAC_TENANT and by a person
        # of beta: not found, in the words used for an object that does not exist.
        theirs = _message(lambda c=call: c(project, refs, tenant="beta"))
        nobody = _message(lambda c=call: c(project, missing, tenant="beta"))
        assert theirs == nobody.replace("feedc0ffee00", refs[_kind(name)]), name
        monkeypatch.setenv("AGAC_TENANT", "beta")
        _message(lambda c=call: c(project, refs))
        monkeypatch.delenv("AGAC_TENANT")
        _message(lambda c=call: c(project, refs, principal=Person("beta", "gamma")))
        # A person of acme (among others) finds it; the lookup itself is fine.
    assert api.status(refs["run"], project, principal=Person("beta", "acme"))["tenant"] == "acme"
    assert api.status(refs["run"], project, tenant="acme")["state"] == "succeeded"
    assert (
        api.approvals_show(refs["proposal"], project, principal=Person("acme"))["tenant"] == "acme"
    )
    with pytest.raises(NotFound):  # naming a tenant the person is not in leaves nothing
        api.status(refs["run"], project, principal=Person("acme"), tenant="beta")
    with pytest.raises(NotFound):  # and nothing is admitted there
        api.run("wf", project, principal=Person("acme"), tenant="beta")
    with pytest.raises(UsageError, match="name the tenant"):
        api.run("wf", project, principal=Person("acme", "beta"))
    # Lists leave other tenants' objects out.
    assert api.list_runs(None, project, tenant="beta") == []
    assert api.effects_list(None, project, tenant="beta") == []
    assert api.approvals_list(None, project, tenant="beta", every=True) == []


def _kind(name: str) -> str:
    if name.startswith(("approv", "approve", "reject", "revise")):
        return "proposal"
    if name.startswith("effects"):
        return "effect"
    return "run"


def test_t2_tenant_names_are_checked(project: Path) -> None:
    write_project(project, WF.split("  - name: send")[0], data={"data/a.jsonl": rows(1)})
    with pytest.raises(UsageError, match="not a tenant name"):
        api.run("wf", project, tenant="no spaces")
    (project / "agac.yml").write_text("tenant: acme\n")
    assert api.run("wf", project).summary["tenant"] == "acme"
    assert api.status("wf", project)["tenant"] == "acme"
    (project / "agac.yml").write_text("tenant: 'a b'\n")
    with pytest.raises(ConfigError) as bad:
        api.status("wf", project)
    assert [p.code for p in bad.value.problems] == ["invalid_tenant"]
    assert bad.value.problems[0].line == 1
