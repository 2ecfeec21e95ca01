"""S6 (issue 29, item 6): ``agac run`` of one workflow started by several processes at the
same instant, on SQLite and on PostgreSQL. The store decides which process admits the run
(its unique open-run index); a process that lost never deletes what it did not create,
and the run is executed once: one run, every record answered once, the ledger complete.

Each repetition starts ``PROCESSES`` real ``agac run`` subprocesses behind a gate: each
imports agac, says it is ready, and waits for the gate file, so that all of them reach
admission within milliseconds of each other. The workflow's first action is a tool that
holds the winner's run (before anything is paid for, so that the run has no usage yet —
the state in which a loser used to discard it) until every other process has exited, so
a slow process cannot arrive after the run ended and rightly admit a second one.

The normal suite repeats the race ``REPEATS`` times per store (4); the issue's figure is
50: ``AGAC_TEST_RACE_REPEATS=50 pytest tests/crash/test_admission_race.py``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from agac.store.repository import Store
from agac.store.runs import run_lease
from agac.store.values import RunSettings

#: Read at import: the suite's isolation fixture clears AGAC_* for each test.
REPEATS = int(os.environ.get("AGAC_TEST_RACE_REPEATS") or 4)
PROCESSES = 3
RECORDS = 12

LAUNCHER = """
import os, sys, time
import agac.cli.main, agac.api, agac.engine.lifecycle.runs  # the imports, before the gate
ready, gate, done = sys.argv[1:4]
open(ready, "w").close()
while not os.path.exists(gate):
    time.sleep(0.001)
sys.argv = ["agac", *sys.argv[4:]]
try:
    agac.cli.main.main()
finally:
    open(done, "w").close()
"""

TOOLS = """
import os, time
from pathlib import Path

def hold(inputs, ctx):
    # Hold the run until every other process has exited (at most 60 s).
    folder = Path(os.environ["RACE_DIR"])
    deadline = time.monotonic() + 60
    while len(list(folder.glob("done-*"))) < int(os.environ["RACE_OTHERS"]) \\
            and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(folder / "calls.log", "a") as f:
        f.write(f"{ctx.workflow} {ctx.record_key} {os.getpid()}\\n")
    return {"held": True}
"""

WF = """
name: {name}
input: {{path: {data}/, id_field: id}}
defaults: {{model: mock/m1, max_concurrency: 4}}
actions:
  - name: hold
    kind: tool
    function: tools.race:hold
  - name: classify
    dependencies: [hold]
    prompt: "Classify: {{{{ source.text }}}}"
"""


def _race(root: Path, store_url: str, rep: int) -> list[subprocess.CompletedProcess[str]]:
    """Start PROCESSES ``agac run`` of workflow ``race<rep>`` together; their results."""
    name, data = f"race{rep}", f"data{rep}"
    folder = root / f"rep{rep}"
    folder.mkdir()
    (root / "workflows" / f"{name}.yml").write_text(WF.format(name=name, data=data))
    write_project_data(root / data / "a.jsonl", rep)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGAC_")}
    env.update(AGAC_STORE=store_url, RACE_DIR=str(folder), RACE_OTHERS=str(PROCESSES - 1))
    procs = []
    for i in range(PROCESSES):
        out = open(folder / f"out-{i}", "w")  # noqa: SIM115 - the child writes it
        err = open(folder / f"err-{i}", "w")  # noqa: SIM115
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    LAUNCHER,
                    str(folder / f"ready-{i}"),
                    str(root / "gate"),
                    str(folder / f"done-{i}"),
                    "run",
                    name,
                    "--json",
                ],
                cwd=root,
                env=env,
                stdout=out,
                stderr=err,
                text=True,
            )
        )
        out.close()
        err.close()
    try:
        deadline = time.monotonic() + 60
        while len(list(folder.glob("ready-*"))) < PROCESSES:
            died = [i for i, p in enumerate(procs) if p.poll() is not None]
            assert not died, (folder / f"err-{died[0]}").read_text()[-2000:]
            assert time.monotonic() < deadline, "the launchers never got ready"
            time.sleep(0.01)
        (root / "gate").write_text("")
        for p in procs:
            p.wait(timeout=120)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        (root / "gate").unlink(missing_ok=True)
    return [
        subprocess.CompletedProcess(
            p.args,
            p.returncode,
            (folder / f"out-{i}").read_text(),
            (folder / f"err-{i}").read_text(),
        )
        for i, p in enumerate(procs)
    ]


def write_project_data(path: Path, rep: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(f'{{"id": "r{i}", "text": "rep {rep} text {i}"}}\n' for i in range(RECORDS))
    )


def _check_one_run(
    root: Path, engine: sa.Engine, rep: int, results: list[subprocess.CompletedProcess[str]]
) -> None:
    name = f"race{rep}"
    why = "\n".join(f"[{r.returncode}] {r.stderr.strip()[-600:]}" for r in results)
    assert all(r.returncode in (0, 75) for r in results), why
    assert sum(r.returncode == 0 for r in results) >= 1, why
    assert not any("bug in agac" in r.stderr for r in results), why
    with engine.connect() as conn:
        runs = conn.execute(
            sa.text("SELECT id, state FROM runs WHERE workflow = :w"), {"w": name}
        ).all()
        assert [state for _, state in runs] == ["succeeded"], (runs, why)
        run_id = runs[0][0]
        answered = conn.execute(
            sa.text(
                "SELECT action, count(*), count(DISTINCT unit_key) FROM outcomes "
                "WHERE run_id = :r AND status = 'answered' GROUP BY action ORDER BY action"
            ),
            {"r": run_id},
        ).all()
        assert [tuple(a) for a in answered] == [
            ("classify", RECORDS, RECORDS),
            ("hold", RECORDS, RECORDS),
        ], why
        # the ledger: one call per unit of each action, all of this run (none orphaned)
        ledger = conn.execute(
            sa.text(
                "SELECT u.action, count(*), count(DISTINCT u.unit_key), count(r.id) FROM usage u "
                "LEFT JOIN runs r ON r.id = u.run_id WHERE u.unit_key LIKE 'r%' AND "
                "(u.run_id = :r OR r.id IS NULL) GROUP BY u.action ORDER BY u.action"
            ),
            {"r": run_id},
        ).all()
        assert [tuple(x) for x in ledger] == [
            ("classify", RECORDS, RECORDS, RECORDS),
            ("hold", RECORDS, RECORDS, RECORDS),
        ], why
    calls = (root / f"rep{rep}" / "calls.log").read_text().splitlines()
    keys = sorted(line.split()[1] for line in calls if line.split()[0] == name)
    assert keys == sorted(f"r{i}" for i in range(RECORDS)), why  # each record once


def test_i29_6_s6_runs_started_together_admit_one_run_answered_once(
    tmp_path: Path, store_url: str
) -> None:
    root = tmp_path / "proj"
    (root / "workflows").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "agac.yml").write_text("")
    (root / "tools" / "__init__.py").write_text("")
    (root / "tools" / "race.py").write_text(TOOLS)
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        for rep in range(REPEATS):
            results = _race(root, store_url, rep)
            _check_one_run(root, engine, rep, results)
    finally:
        engine.dispose()


def test_s6_a_process_whose_lease_was_taken_discards_nothing(store_url: str) -> None:
    """The admitter undoes its admission only while it still holds the run's lease: once
    another process took the run, the admitter's discard is refused and deletes nothing."""
    store = Store(store_url)
    try:
        for run_id in ("mine", "taken"):
            _admit(store, run_id)
        mine = store.acquire_lease(run_lease("mine"), host="h", pid=1, ttl=30)
        assert store.discard_run("mine", mine) is True
        assert store.get_run("mine") is None and store.get_lease(run_lease("mine")) is None
        first = store.acquire_lease(run_lease("taken"), host="h", pid=1, ttl=30)
        store.release_lease(run_lease("taken"), first)
        second = store.acquire_lease(run_lease("taken"), host="h", pid=2, ttl=30)
        assert second == first + 1
        assert store.discard_run("taken", first) is False
        assert store.get_run("taken") is not None
        assert store.get_lease(run_lease("taken")).token == second  # type: ignore[union-attr]
    finally:
        store.close()


def test_s6_a_run_found_open_or_kept_from_a_race_is_not_admitted_by_this_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``admitted`` is what the store decided: true for the call whose insert it kept,
    false for one that found the run open — also when, in a race, it saw no open run and
    lost the insert (RunAlreadyOpen)."""
    from agac import api
    from agac.engine.lifecycle.admission import open_or_admit
    from agac.engine.lifecycle.options import RunOptions

    monkeypatch.chdir(tmp_path)
    (tmp_path / "agac.yml").write_text("")
    (tmp_path / "data.jsonl").write_text('{"text": "a"}\n')
    wf = {
        "name": "adm",
        "input": {"path": "data.jsonl"},
        "actions": [{"name": "ask", "model": "mock/m", "prompt": "Say {{ source.text }}"}],
    }
    project = api.project_of(tmp_path)
    workflow = api.load_workflow(wf, project)
    store = api.open_store(project)
    try:
        first = open_or_admit(project, store, workflow, RunOptions())
        assert first.admitted is True
        again = open_or_admit(project, store, workflow, RunOptions())
        assert (again.run.id, again.admitted) == (first.run.id, False)
        real_open_run, blind = store.open_run, [True]

        def open_run_blind_once(*args: Any, **kwargs: Any) -> Any:
            if blind.pop() if blind else False:
                return None  # as a process that looked before the other's insert
            return real_open_run(*args, **kwargs)

        monkeypatch.setattr(store, "open_run", open_run_blind_once)
        raced = open_or_admit(project, store, workflow, RunOptions())
        assert (raced.run.id, raced.admitted) == (first.run.id, False)
    finally:
        store.close()


def test_s6_new_against_a_live_owner_refuses_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agac run --new`` while another live process owns the open run: exit 75,
    ``lease_held`` naming the owner, and the run it would have ended is untouched."""
    from agac import api
    from agac.engine.lifecycle.admission import open_or_admit
    from agac.engine.lifecycle.options import RunOptions

    root = tmp_path / "proj"
    (root / "workflows").mkdir(parents=True)
    (root / "agac.yml").write_text("")
    (root / "workflows" / "wf.yml").write_text(
        "name: wf\ninput: {path: data/}\nactions:\n  - {name: ask, model: mock/m, prompt: "
        "'Say {{ source.text }}'}\n"
    )
    write_project_data(root / "data" / "a.jsonl", 0)
    monkeypatch.chdir(root)
    project = api.project_of(root)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        store = api.open_store(project)
        try:
            held = open_or_admit(project, store, api.load_workflow("wf", project), RunOptions()).run
            store.acquire_lease(
                run_lease(held.id), host=socket.gethostname(), pid=sleeper.pid, ttl=60
            )
        finally:
            store.close()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGAC_")}
        new = subprocess.run(
            [sys.executable, "-m", "agac.cli.main", "run", "wf", "--new", "--json"],
            check=False,
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert new.returncode == 75, new.stderr
        doc = json.loads(new.stdout)
        assert doc["error"]["code"] == "lease_held" and str(sleeper.pid) in doc["error"]["message"]
        assert [(r["run_id"], r["state"]) for r in api.list_runs(project=root)] == [
            (held.id, "queued")
        ]
    finally:
        sleeper.kill()
        sleeper.wait()


def _admit(store: Store, run_id: str) -> None:
    store.create_run(
        id=run_id,
        workflow=f"wf-{run_id}",
        workflow_path="workflows/wf.yml",
        retry_of=None,
        config={},
        config_hash="h",
        snapshot_id="s",
        fresh=False,
        settings=RunSettings(),
        tenant="default",
    )
