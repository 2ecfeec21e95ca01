"""E1, E2: side effects of tool actions — once per idempotency key, intent before the call,
receipt after, unknown outcomes settled by a person, compensation only on request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import rows, run

from agac import api
from agac.errors import RefusedError

FX = """
name: fx
input: {path: data/, id_field: id}
defaults: {model: mock/m1, retry: {max_attempts: 3, backoff: {initial: 10ms, max: 20ms}}}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [classify]
    function: tools.fx:send
    effect: {idempotent: IDEMPOTENT, compensate: tools.fx:undo}
"""

TOOLS = """
import json

def send(inputs, ctx):
    with open("calls.log", "a") as f:
        f.write(json.dumps({"key": ctx.idempotency_key, "record": ctx.record_key}) + "\\n")
    if "boom" in inputs["source"]["text"]:
        raise ValueError("the mail server said no")
    return {"sent": inputs["source"]["id"]}

def undo(inputs, ctx):
    return {"recalled": inputs["receipt"]["sent"], "key": ctx.idempotency_key}
"""


def make_fx(root: Path, *, idempotent: bool = False, data: list | None = None) -> None:
    from agac.testing import write_project

    write_project(
        root,
        FX.replace("IDEMPOTENT", "true" if idempotent else "false"),
        data={"data/a.jsonl": data if data is not None else rows(10)},
        files={"tools/__init__.py": "", "tools/fx.py": TOOLS},
        workflow_file="fx.yml",
    )


def calls(root: Path) -> list[dict]:
    log = root / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_e1_an_effect_that_succeeded_is_never_called_again(project: Path) -> None:
    make_fx(project)
    first = run(project, "fx").summary
    assert first["state"] == "succeeded" and first["actions"]["send"]["tool_calls"] == 10
    assert len({c["key"] for c in calls(project)}) == 10
    again = run(project, "fx", fresh=True).summary  # reuses nothing, but effects never repeat
    assert again["state"] == "succeeded" and again["actions"]["send"]["reused"] == 10
    assert len(calls(project)) == 10
    assert [e["state"] for e in api.effects_list("fx", project)] == ["succeeded"] * 10


def test_e1_new_arguments_make_a_new_key(project: Path) -> None:
    make_fx(project)
    run(project, "fx")
    changed = rows(10)
    changed[3]["text"] = "a new text"
    (project / "data/a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in changed))
    s = run(project, "fx").summary
    assert s["state"] == "succeeded"
    log = calls(project)
    assert len(log) == 11 and log[-1]["record"] == "r00003"
    assert log[-1]["key"] != log[3]["key"]


def test_e1_an_effect_is_not_retried_and_fails_effect_failed(project: Path) -> None:
    data = rows(3)
    data[1]["text"] = "boom"
    make_fx(project, data=data)
    s = run(project, "fx").summary
    assert s["state"] == "partial"
    assert s["actions"]["send"]["reasons"] == {"effect_failed": 1}
    assert len(calls(project)) == 3  # one call each, although max_attempts is 3
    failed = [e for e in api.effects_list("fx", project) if e["state"] == "failed"]
    assert len(failed) == 1 and "mail server" in failed[0]["error"]


def _leave_unknown(project: Path, record: str) -> str:
    """Stand for a crash between the intent and the receipt: the effect's row says started."""
    import os

    from agac.store.repository import Store

    store = Store(os.environ["AGAC_STORE"])
    try:
        (effect,) = [e for e in store.list_effects("fx", tenants=None) if e.unit_key == record]
        store.update_effect(effect.key, state="started", receipt=None)
        return effect.key
    finally:
        store.close()


def _drop_outcome(project: Path, record: str) -> None:
    """...and the unit's outcome was not committed either (an open run lost it)."""
    import os

    from agac.store import tables as t
    from agac.store.repository import Store

    store = Store(os.environ["AGAC_STORE"])
    try:
        with store.engine.begin() as conn:
            conn.execute(
                t.outcomes.delete().where(
                    t.outcomes.c.unit_key == record, t.outcomes.c.action == "send"
                )
            )
            conn.execute(t.runs.update().values(state="running", ended_at=None))
    finally:
        store.close()


def test_e2_unknown_non_idempotent_effect_waits_on_a_person(project: Path) -> None:
    make_fx(project, data=rows(3))
    run(project, "fx")
    key = _leave_unknown(project, "r00001")
    _drop_outcome(project, "r00001")
    paused = run(project, "fx")
    assert paused.exit_code == 75
    s = paused.summary
    assert key.startswith("default:")  # E1 keys start with the tenant (T2)
    assert s["effects_unknown"] == [key.partition(":")[2]] and s["actions"]["send"]["pending"] == 1
    assert s["next"] == "agac effects list fx"
    assert any("agac effects resolve" in n for n in paused.notes)
    assert len(calls(project)) == 3  # never called again automatically
    assert run(project, "fx").exit_code == 75
    with pytest.raises(RefusedError):
        api.effects_compensate(key, project)  # it is unknown: nothing to compensate
    api.effects_resolve(key.partition(":")[2][:12], True, project)
    done = run(project, "fx").summary
    assert done["state"] == "succeeded" and len(calls(project)) == 3
    assert "effects_unknown" not in done


def test_e2_resolved_not_done_is_called_again_with_the_same_key(project: Path) -> None:
    make_fx(project, data=rows(3))
    run(project, "fx")
    key = _leave_unknown(project, "r00002")
    _drop_outcome(project, "r00002")
    assert run(project, "fx").exit_code == 75
    api.effects_resolve(key, False, project)
    assert run(project, "fx").summary["state"] == "succeeded"
    log = calls(project)
    assert len(log) == 4 and log[-1]["key"] == key


def test_e2_unknown_idempotent_effect_is_called_again_with_its_key(project: Path) -> None:
    make_fx(project, idempotent=True, data=rows(3))
    run(project, "fx")
    key = _leave_unknown(project, "r00000")
    _drop_outcome(project, "r00000")
    s = run(project, "fx").summary
    assert s["state"] == "succeeded"
    log = calls(project)
    assert len(log) == 4 and log[-1]["key"] == key


def test_e2_cancel_fails_an_unknown_effect_and_claims_nothing(project: Path) -> None:
    make_fx(project, data=rows(3))
    run(project, "fx")
    _leave_unknown(project, "r00001")
    _drop_outcome(project, "r00001")
    assert run(project, "fx").exit_code == 75
    s = api.cancel("fx", project).summary
    assert s["state"] == "cancelled"
    assert s["actions"]["send"]["reasons"] == {"effect_unknown": 1}


def test_e2_compensation_runs_only_on_request(project: Path) -> None:
    make_fx(project, data=rows(2))
    run(project, "fx")
    effect = api.effects_list("fx", project)[0]
    row = api.effects_compensate(effect["id"], project)
    assert row["state"] == "compensated"
    assert row["resolution"]["compensation"] == {
        "recalled": effect["receipt"]["sent"],
        "key": effect["key"],
    }
    with pytest.raises(RefusedError):
        api.effects_compensate(effect["id"], project)  # once
    assert run(project, "fx", fresh=True).summary["state"] == "succeeded"
    assert len(calls(project)) == 2  # a compensated effect is not redone automatically


STEALING_TOOLS = """
import json, os
import sqlalchemy as sa
from agac.store.repository import Store

def send(inputs, ctx):
    with open("calls.log", "a") as f:
        f.write(json.dumps({"key": ctx.idempotency_key, "record": ctx.record_key}) + "\\n")
    # Another process takes the run over while this effect runs (its lease, new token).
    store = Store(os.environ["AGAC_STORE"], migrate=False)
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE leases SET token = token + 1 WHERE name LIKE 'run:%'"))
    store.close()
    return {"sent": inputs["source"]["id"]}

def undo(inputs, ctx):
    return {}
"""


def test_s3_a_process_that_lost_its_run_starts_no_effect_and_records_no_receipt(
    project: Path,
) -> None:
    """S3 with E1: effect intents and receipts are fenced by the run's lease like every
    other write. The first effect runs, then the run is taken over: its receipt is refused
    (it stays ``started``, for the new owner to treat as unknown, E2) and no further effect
    is started by the process that lost the run."""
    from agac.errors import LeaseLost
    from agac.testing import write_project

    fx = FX.replace("IDEMPOTENT", "false").replace(
        "    effect: {idempotent: false", "    max_concurrency: 1\n    effect: {idempotent: false"
    )
    write_project(
        project,
        fx,
        data={"data/a.jsonl": rows(3)},
        files={"tools/__init__.py": "", "tools/fx.py": STEALING_TOOLS},
        workflow_file="fx.yml",
    )
    with pytest.raises(LeaseLost):
        api.run("fx", project)
    assert [c["record"] for c in calls(project)] == ["r00000"]
    effects = api.effects_list("fx", project)
    assert [(e["record"], e["state"]) for e in effects] == [("r00000", "started")]


def test_effect_sys_exit_fails_unit_effect_failed(project: Path) -> None:
    """A tool with an effect is user code too: sys.exit fails its unit, the run goes on."""
    data = rows(3)
    data[1]["text"] = "boom"
    make_fx(project, data=data)
    tools = project / "tools" / "fx.py"
    tools.write_text(
        tools.read_text().replace(
            'raise ValueError("the mail server said no")', "import sys; sys.exit(3)"
        )
    )
    s = run(project, "fx").summary
    assert s["state"] == "partial"
    assert s["actions"]["send"]["reasons"] == {"effect_failed": 1}
    failed = [e for e in api.effects_list("fx", project) if e["state"] == "failed"]
    assert [e["error"] for e in failed] == ["SystemExit: 3"]


def test_compensation_sys_exit_is_refused_not_fatal(project: Path) -> None:
    make_fx(project)
    tools = project / "tools" / "fx.py"
    tools.write_text(
        tools.read_text().replace(
            '    return {"recalled"',
            '    if __import__("os").path.exists("exit.flag"):\n        raise SystemExit(4)\n'
            '    return {"recalled"',
        )
    )
    run(project, "fx")
    effect = api.effects_list("fx", project)[0]
    (project / "exit.flag").write_text("")
    with pytest.raises(RefusedError, match="raised SystemExit: 4; the effect is unchanged"):
        api.effects_compensate(effect["id"], project)
    assert api.effects_list("fx", project)[0]["state"] == "succeeded"
