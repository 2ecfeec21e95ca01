"""T2 from the command line: ``--tenant T``, ``AGAC_TENANT`` and ``tenant:`` in agac.yml
choose the tenant a command acts in; a run keeps it (summary, ``runs list``, exports,
events); another tenant's run, record, proposal, effect, cost or batch is "not found"
(exit 2), in the words used for one that does not exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import agac

from agac.testing import write_project

WF = """
name: wf
input: {path: data/, id_field: id}
defaults: {model: mock/m1}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [classify]
    function: tools:send
    effect: {idempotent: true}
    approval: {approvers: [ann]}
"""

TOOLS = """
def send(inputs, ctx):
    return {"sent": inputs["source"]["id"], "tenant": ctx.tenant}
"""

ENV = {"AGAC_SECRET": "cli-tenants", "AGAC_USER": "ann"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project where tenant acme ran wf to the end (proposals approved, effects done)."""
    root = tmp_path_factory.mktemp("tenants")
    write_project(
        root,
        WF,
        data={"data/a.jsonl": [{"id": f"r{i}", "text": f"t{i}"} for i in range(3)]},
        files={"tools.py": TOOLS},
    )
    paused = agac("run", "wf", "--tenant", "acme", "--json", cwd=root, env=ENV)
    assert paused.code == 75, paused
    for p in agac("approvals", "list", "--tenant", "acme", "--json", cwd=root, env=ENV).json():
        assert agac("approve", p["id"], "--tenant", "acme", cwd=root, env=ENV).code == 0
    done = agac("run", "wf", "--tenant", "acme", "--json", cwd=root, env=ENV)
    assert done.code == 0, done
    return root


def _ids(root: Path) -> dict[str, str]:
    run = agac("status", "wf", "--tenant", "acme", "--json", cwd=root, env=ENV).json()
    proposal = agac(
        "approvals", "list", "--all", "--tenant", "acme", "--json", cwd=root, env=ENV
    ).json()[0]
    effect = agac("effects", "list", "--tenant", "acme", "--json", cwd=root, env=ENV).json()[0]
    return {"run": run["run_id"], "proposal": proposal["id"], "effect": effect["id"]}


def test_t2_the_run_keeps_its_tenant_in_summary_runs_list_exports_and_events(project: Path) -> None:
    status = agac("status", "wf", "--tenant", "acme", "--json", cwd=project, env=ENV)
    assert status.code == 0 and status.json()["tenant"] == "acme"
    listed = agac("runs", "list", "--tenant", "acme", "--json", cwd=project, env=ENV).json()
    assert [r["tenant"] for r in listed] == ["acme"]
    assert "acme" in agac("runs", "list", "--tenant", "acme", cwd=project, env=ENV).out
    exported = agac(
        "export", "wf", "--action", "classify", "--tenant", "acme", cwd=project, env=ENV
    )
    assert [json.loads(x)["tenant"] for x in exported.out.splitlines()] == ["acme"] * 3
    csv = agac(
        "export",
        "wf",
        "--action",
        "classify",
        "--format",
        "csv",
        "--tenant",
        "acme",
        cwd=project,
        env=ENV,
    )
    assert csv.out.splitlines()[0].endswith(",tenant") and csv.out.splitlines()[1].endswith(",acme")
    events = agac("events", "--tenant", "acme", "--json", cwd=project, env=ENV).json()
    assert {e["tenant"] for e in events} == {"acme"}
    assert events[0]["data"]["tenant"] == "acme"
    # AGAC_TENANT and tenant: in agac.yml say the same as --tenant; --tenant wins.
    by_env = agac("status", "wf", "--json", cwd=project, env={**ENV, "AGAC_TENANT": "acme"})
    assert by_env.code == 0 and by_env.json()["run_id"] == status.json()["run_id"]
    (project / "agac.yml").write_text("tenant: acme\n")
    try:
        by_file = agac("status", "wf", "--json", cwd=project, env=ENV)
        assert by_file.code == 0 and by_file.json()["tenant"] == "acme"
        assert agac("status", "wf", "--tenant", "beta", cwd=project, env=ENV).code == 2
    finally:
        (project / "agac.yml").write_text("")


OBJECTS = [
    ("status", "{run}"),
    ("events", "{run}"),
    ("cost", "{run}"),
    ("records", "list", "wf", "--run", "{run}"),
    ("records", "show", "r0", "--run", "{run}"),
    ("export", "wf", "--action", "classify", "--run", "{run}", "--out", "x.jsonl"),
    ("cancel", "{run}"),
    ("approvals", "show", "{proposal}"),
    ("approve", "{proposal}"),
    ("reject", "{proposal}", "--reason", "no"),
    ("revise", "{proposal}", "--set", "x=1"),
    ("effects", "resolve", "{effect}", "--done"),
    ("effects", "compensate", "{effect}"),
]


@pytest.mark.parametrize("args", OBJECTS, ids=[" ".join(a[:2]) for a in OBJECTS])
def test_t2_another_tenants_object_is_not_found(project: Path, args: tuple[str, ...]) -> None:
    ids = _ids(project)
    theirs = [a.format(**ids) for a in args]
    nobody = [
        a.format(run="feedc0ffee00", proposal="feedc0ffee00", effect="feedc0ffee00") for a in args
    ]
    for env in ({**ENV, "AGAC_TENANT": "beta"}, ENV):  # tenant beta; tenant default
        found = agac(*theirs, "--json", cwd=project, env=env)
        missing = agac(*nobody, "--json", cwd=project, env=env)
        assert found.code == missing.code == 2, found
        said, expected = found.json()["error"], missing.json()["error"]
        assert said["code"] == expected["code"] == "not_found", found
        for name, ref in ids.items():
            if ref in said["message"]:
                assert said["message"] == expected["message"].replace("feedc0ffee00", ref), name


def test_t2_lists_leave_other_tenants_out_and_names_are_checked(project: Path) -> None:
    for args in (
        ("runs", "list"),
        ("effects", "list"),
        ("approvals", "list", "--all"),
        ("batch", "list"),
    ):
        assert agac(*args, "--tenant", "beta", "--json", cwd=project, env=ENV).json() == []
    bad = agac("status", "--tenant", "no/slash", cwd=project, env=ENV)
    assert bad.code == 2 and "not a tenant name" in bad.err
    (project / "agac.yml").write_text("tenant: 'a b'\n")
    try:
        refused = agac("status", cwd=project, env=ENV)
        assert refused.code == 2 and "invalid_tenant" in refused.err and "agac.yml:1" in refused.err
    finally:
        (project / "agac.yml").write_text("")
