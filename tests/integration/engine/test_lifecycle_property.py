"""Property test (in process): random interleavings of run, interrupted run, admission
without execution (a crash right after it), --new, retry, cancel, approve and reject
(A1-A3: the last action waits for a person), with and without provider failures. After
every step the accounting of every run adds up (S4), a run's final state never changes,
and no approval is acted on twice."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from engine_helpers import BASIC, rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agac import api
from agac.config.project import find_project
from agac.engine.lifecycle.admission import admit_run
from agac.engine.lifecycle.options import RunOptions
from agac.errors import AgacError
from agac.store.repository import FINAL_STATES, Store
from agac.testing import write_project

OPS = st.sampled_from(
    [
        "run",
        "interrupted",
        "admit",
        "new",
        "retry",
        "cancel",
        "flaky",
        "steady",
        "approve",
        "reject",
    ]
)

PUBLISH = """
  - name: publish
    kind: tool
    dependencies: [summarize]
    function: tools.pub:publish
    approval: {approvers: [ann]}
"""

TOOLS = """
import json

def publish(inputs, ctx):
    with open(CALLS, "a") as f:
        f.write(json.dumps({"record": ctx.record_key, "run": ctx.run_id}) + "\\n")
    return {"published": inputs["source"]["id"]}
"""


def _interrupting(after: int) -> Any:
    def on_start(progress: Any, executor: Any) -> None:
        seen = {"n": 0}

        def listener(_: Any) -> None:
            seen["n"] += 1
            if seen["n"] >= after:
                executor.stop()  # the first Ctrl-C: stop sending, settle what is in flight

        progress.listeners.append(listener)

    return on_start


def _step(root: Path, op: str) -> None:
    if op == "flaky":
        os.environ["AGAC_MOCK_FAIL_RATE"] = "0.5"
    elif op == "steady":
        os.environ["AGAC_MOCK_FAIL_RATE"] = "0"
    elif op == "run":
        api.run("wf", root)
    elif op == "interrupted":
        api.run("wf", root, on_start=_interrupting(7))
    elif op == "new":
        api.run("wf", root, new=True)
    elif op == "retry":
        api.retry("wf", root)
    elif op == "cancel":
        api.cancel("wf", root)
    elif op == "approve":
        for p in api.approvals_list("wf", root)[:8]:
            api.approve(p["id"], root, who="ann")
    elif op == "reject":
        for p in api.approvals_list("wf", root)[:2]:
            api.reject(p["id"], "not now", root, who="ann")
    elif op == "admit":
        store = Store(os.environ["AGAC_STORE"])
        try:
            if store.open_run("wf", tenant="default") is None:
                proj = find_project(root)
                admit_run(proj, store, api.load_workflow("wf", proj), RunOptions())
        finally:
            store.close()


def _check(root: Path, finals: dict[str, str]) -> None:
    for r in api.list_runs(None, root, limit=1000):
        s = api.status(r["run_id"], root)
        for a in s["actions"].values():
            assert a["answered"] + a["failed"] + a["skipped"] + a["pending"] == a["records"]
            assert sum(a["reasons"].values()) == a["failed"] + a["skipped"]
        if s["state"] in FINAL_STATES:
            assert all(a["pending"] == 0 for a in s["actions"].values())
            assert finals.setdefault(s["run_id"], s["state"]) == s["state"]
        else:
            assert s["run_id"] not in finals  # a final state never changes
    # A2, A3: a tool behind an approval acts only on approvals, at most once per approval
    log = root / "calls.log"
    acted = (
        [json.loads(line)["record"] for line in log.read_text().splitlines()]
        if log.exists()
        else []
    )
    approved = [
        p["record"]
        for p in api.approvals_list("wf", root, every=True)
        if p["state"] == "approved" and p["used_by"]
    ]
    for record in set(acted):
        assert acted.count(record) <= approved.count(record), record


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(OPS, min_size=1, max_size=7))
def test_accounting_adds_up_and_final_states_never_change(ops: list[str]) -> None:
    saved = {k: os.environ.get(k) for k in ("AGAC_STORE", "AGAC_MOCK_FAIL_RATE")}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_project(
            root,
            BASIC.replace("max_attempts: 3", "max_attempts: 1") + PUBLISH,
            data={"data/a.jsonl": rows(12)},
            files={
                "tools/__init__.py": "",
                "tools/pub.py": TOOLS.replace("CALLS", repr(str(root / "calls.log"))),
            },
        )
        os.environ["AGAC_STORE"] = f"sqlite:///{root}/agac.db"
        os.environ["AGAC_MOCK_FAIL_RATE"] = "0"
        finals: dict[str, str] = {}
        try:
            for op in ops:
                try:
                    _step(root, op)
                except AgacError as exc:
                    assert exc.exit_code in (2, 75), exc  # refused (retry, cancel) or paused
                _check(root, finals)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
