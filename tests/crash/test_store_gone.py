"""S7 (issue 29, item 7): a SQLite store deleted (``rm .agac/agac.db*``) or replaced under a
running ``agac run`` stops the run at its next write with ``store_gone`` and exit 1 — it
never writes on into the unlinked file and reports ``succeeded``.

A real ``agac run`` subprocess: its tool holds record ``r3`` until the test has deleted or
replaced the store, so the change happens mid-run, every time.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from agac.testing import write_project

WF = """
name: wf
input: {path: data/, id_field: id}
actions:
  - name: step
    kind: tool
    max_concurrency: 1
    function: tools.hold:step
"""

TOOLS = """
import time
from pathlib import Path

def step(inputs, ctx):
    if ctx.record_key == "r3":
        Path("reached").touch()
        deadline = time.monotonic() + 60
        while not Path("go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    return {"done": ctx.record_key}
"""


def _agac(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGAC_")}
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        check=False,
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _run_and_change_store(root: Path, change: str) -> subprocess.CompletedProcess[str]:
    write_project(
        root,
        WF,
        data={"data/a.jsonl": [{"id": f"r{i}"} for i in range(8)]},
        files={"tools/__init__.py": "", "tools/hold.py": TOOLS},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGAC_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agac.cli.main", "run", "wf", "--json"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (root / "reached").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        db = root / ".agac" / "agac.db"
        if change == "deleted":
            for path in root.joinpath(".agac").glob("agac.db*"):
                path.unlink()
        else:  # replaced: a copy of the store takes its path (as restoring a backup would)
            copy = db.with_name("agac.db.copy")
            with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
                src.backup(dst)
            os.replace(copy, db)
        (root / "go").touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _check_stopped(root: Path, change: str, result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["error"]["code"] == "store_gone", doc
    db = str(root / ".agac" / "agac.db")
    assert db in doc["error"]["message"]
    assert ("no longer exists" if change == "deleted" else "now names another file") in doc[
        "error"
    ]["message"]
    assert db in result.stderr  # the human message names the file too
    assert "succeeded" not in result.stdout


def _runs(root: Path) -> list[dict[str, object]]:
    listed = _agac(root, "runs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout))


def test_i29_7_a_store_deleted_under_a_run_stops_it(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    _check_stopped(root, "deleted", _run_and_change_store(root, "deleted"))
    assert _runs(root) == []  # nothing was written on into a new file at the path


def test_s7_a_store_replaced_under_a_run_stops_it(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    _check_stopped(root, "replaced", _run_and_change_store(root, "replaced"))
    # the copy holds the run as it was when copied: not final, never "succeeded"
    assert [r["state"] for r in _runs(root)] == ["running"]
