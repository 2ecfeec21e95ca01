"""The CLI's one error boundary: nothing escapes as a traceback, ``--json`` always answers
in JSON, and no SQL text or bound value reaches a message.

The first tests replay the reports this boundary answers (an uncreatable store folder,
``init`` into /proc, ``export --out`` a folder, a read-only store, a busy emulator port)
through the real console script. The walks then run EVERY command of the Click app —
the list is generated from it, so a new command cannot skip them — against a store that
cannot be created and against a read-only one, with and without ``--json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from cli_support import Quickstart, agac, leaf_commands
from click.testing import CliRunner

from agac.cli.main import cli

UNCREATABLE = "sqlite:////proc/nope/agac.db"
SQL = re.compile(r"\b(INSERT|UPDATE|DELETE|SELECT)\b|\[SQL|\[parameters")
COMMANDS = leaf_commands()

#: A value for every argument and required option a command may have, by parameter name.
#: A new command with a parameter not here fails the walk until a value is added.
VALUES = {
    "workflow": "review_triage",
    "ref": "review_triage",
    "proposal_id": "p1",
    "effect_id": "e1",
    "key": "r0001",
    "action": "classify",
    "record": "r0001",
    "reason": "because",
    "changes": "text=x",
    "batch_id": "b1",
    "name": "ann",
    "tenants": "default",
    "token_id": "t1",
    "run_a": "review_triage",
    "run_b": "review_triage",
    "sample": "2",
}
#: Commands that never open the store, and what they answer in the walks.
NO_STORE = {
    "agac validate": 0,
    "agac emulator env": 0,
    "agac emulator": 2,
    "agac init": 0,
    "agac schema": 0,
    "agac store info": 0,
}  # store info describes a store without opening it ("exists")


def _busy_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


busy_port = pytest.fixture(_busy_port)


def _args(path: str, cmd: click.Command, port: int, as_json: bool, scratch: Path) -> list[str]:
    args = path.split()[1:]
    for param in cmd.params:
        if param.name == "directory":
            args.append(str(scratch / "newproj"))
        elif param.required:
            assert param.name in VALUES, f"{path}: give the walk a value for {param.name!r}"
            if isinstance(param, click.Option):
                args.append(param.opts[0])
            args.append(VALUES[param.name])
    if path in ("agac emulator", "agac serve"):  # a port in use: they answer, never serve
        args += ["--port", str(port)]
    if as_json and any(p.name == "as_json" for p in cmd.params):
        args.append("--json")
    return args


def _invoke(args: list[str], env: dict[str, str]) -> Any:
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=True)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"agac {' '.join(args)} raised {result.exception!r}"
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def _check(path: str, args: list[str], result: Any) -> dict[str, Any] | None:
    """The checks every failure must pass; the JSON document under --json."""
    doc = None
    if "--json" in args:
        doc = json.loads(result.stdout)  # stdout is exactly one JSON document
        if result.exit_code != 0:
            assert doc["ok"] is False, doc
            assert "errors" in doc or set(doc["error"]) == {"code", "message", "hint"}, doc
    if result.exit_code != 0 and doc is None:
        assert "agac:" in result.stderr or ": error:" in result.stderr, result.stderr
    assert not SQL.search(result.stdout + result.stderr), result.stdout + result.stderr
    return doc


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_json_error_when_store_unwritable(
    path: str,
    as_json: bool,
    quickstart_copy: Path,
    busy_port: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every command, with a store whose folder cannot be created: a message naming the
    store and the fix, exit 1 (2 when refused first), JSON on stdout under --json."""
    monkeypatch.chdir(quickstart_copy)
    args = _args(path, COMMANDS[path], busy_port, as_json, tmp_path)
    result = _invoke(args, {"AGAC_STORE": UNCREATABLE})
    doc = _check(path, args, result)
    if path in NO_STORE:
        assert result.exit_code == NO_STORE[path], result.stderr
        return
    assert result.exit_code in (1, 2), (args, result.exit_code, result.stderr)
    if result.exit_code == 1:
        assert "/proc/nope" in result.stderr and "AGAC_STORE" in result.stderr
        if doc is not None:
            assert doc["error"]["code"] == "store_error"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_on_a_read_only_store_answers_without_sql(
    path: str,
    read_only_quickstart: Path,
    busy_port: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store that can be read but not written: reading commands work, writing ones fail
    exit 1 with ``store_error`` naming the read-only file — never with the statement."""
    monkeypatch.chdir(read_only_quickstart)
    args = _args(path, COMMANDS[path], busy_port, True, tmp_path)
    result = _invoke(args, {})
    doc = _check(path, args, result)
    assert result.exit_code in (0, 1, 2, 75), (args, result.exit_code, result.stderr)
    if result.exit_code == 1 and doc is not None and "error" in doc:
        assert doc["error"]["code"] == "store_error", doc
        assert "readonly" in doc["error"]["message"] or "read-only" in doc["error"]["message"]


def test_the_walks_cover_nested_and_lazy_commands() -> None:
    assert {
        "agac runs list",
        "agac batch resolve",
        "agac emulator",
        "agac emulator env",
        "agac worker",
        "agac store upgrade",
    } <= set(COMMANDS)


# -- the reported cases, through the real console script ---------------------------------


def test_json_error_when_store_folder_cannot_be_created(quickstart: Quickstart) -> None:
    env = {"AGAC_STORE": UNCREATABLE}
    plain = quickstart.agac("run", "review_triage", env=env)
    assert plain.code == 1 and plain.out == "" and "Traceback" not in plain.err
    assert "cannot create the store's folder /proc/nope" in plain.err
    assert "hint: set AGAC_STORE" in plain.err
    as_json = quickstart.agac("run", "review_triage", "--json", env=env)
    assert as_json.code == 1
    assert as_json.json() == {
        "ok": False,
        "error": {
            "code": "store_error",
            "message": "cannot create the store's folder /proc/nope: No such file or directory",
            "hint": "set AGAC_STORE (or store: in agac.yml) to a path you can write, e.g. "
            "sqlite:///.agac/agac.db under the project",
        },
    }


def test_init_into_a_path_that_cannot_be_created_names_it(tmp_path: Path) -> None:
    done = agac("init", "/proc/x", "--json", cwd=tmp_path)
    assert done.code == 1 and "Traceback" not in done.err
    error = done.json()["error"]
    assert error["code"] in ("not_found", "permission_denied")
    assert error["message"].startswith("/proc/x: ") and error["hint"]
    assert "agac: /proc/x: " in agac("init", "/proc/x", cwd=tmp_path).err


def test_export_out_an_existing_folder_is_refused(quickstart: Quickstart) -> None:
    (quickstart.root / "results").mkdir(exist_ok=True)
    done = quickstart.agac(
        "export", "review_triage", "--action", "classify", "--out", "results", "--json"
    )
    assert done.code == 2 and "Traceback" not in done.err
    assert done.json()["error"] == {
        "code": "usage_error",
        "message": "results is a folder, not a file",
        "hint": "name the file to write, e.g. results/results.jsonl",
    }
    assert list((quickstart.root / "results").iterdir()) == []


def test_read_only_store_never_prints_the_statement(read_only_quickstart: Path) -> None:
    """The report that printed a whole INSERT: now the driver's words, the file, the fix."""
    done = agac("run", "review_triage", "--new", "--json", cwd=read_only_quickstart)
    assert done.code == 1 and "Traceback" not in done.err
    assert not SQL.search(done.out + done.err), done
    error = done.json()["error"]
    assert error["code"] == "store_error"
    assert "attempt to write a readonly database" in error["message"]
    assert str(read_only_quickstart / ".agac" / "agac.db") in error["message"]
    assert "make the file and its folder writable" in error["hint"]
    # Reading still works.
    assert agac("status", "review_triage", "--json", cwd=read_only_quickstart).code == 0


def test_usage_error_under_json_is_json(quickstart: Quickstart) -> None:
    done = quickstart.agac("run", "review_triage", "--poll-interval", "1.5h", "--json")
    assert done.code == 2
    error = done.json()["error"]
    assert error["code"] == "usage_error" and "--poll-interval" in error["message"]
    assert "Error: Invalid value for '--poll-interval'" in done.err


def test_unexpected_error_is_reported_not_raised(
    monkeypatch: pytest.MonkeyPatch, quickstart_copy: Path
) -> None:
    """A bug inside a command is ``internal_error`` with a hint to report it, exit 1."""
    from agac import api

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("a bug\nwith a second line")

    monkeypatch.setattr(api, "cost", broken)
    monkeypatch.chdir(quickstart_copy)
    result = _invoke(["cost", "--json"], {})
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"] == {
        "code": "internal_error",
        "message": "unexpected TypeError: a bug",
        "hint": "this is a bug in agac: please report it with the command you ran "
        "(AGAC_DEBUG=1 prints the traceback)",
    }


def test_emulator_refuses_a_port_in_use_before_announcing(tmp_path: Path, busy_port: int) -> None:
    done = agac("emulator", "--port", str(busy_port), cwd=tmp_path, timeout=240)
    assert done.code == 2
    assert "agac emulator on" not in done.err and "Traceback" not in done.err
    assert f"cannot serve on 127.0.0.1:{busy_port}" in done.err and "--port" in done.err


def test_serve_refuses_a_port_in_use_before_announcing(
    quickstart_copy: Path, busy_port: int
) -> None:
    """One person on loopback: a busy port is an error before any sign-in link is made."""
    done = agac("serve", "--port", str(busy_port), cwd=quickstart_copy, timeout=240)
    assert done.code == 2, done.err
    assert "open this link" not in done.out + done.err and "Traceback" not in done.err
    assert f"cannot serve on 127.0.0.1:{busy_port}" in done.err and "--port" in done.err


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def quickstart_copy(quickstart: Quickstart, tmp_path: Path) -> Path:
    """A copy of the run quickstart project, for commands that may write."""
    target = tmp_path / "proj"
    shutil.copytree(quickstart.root, target)
    return target


@pytest.fixture(scope="module")
def read_only_quickstart(
    quickstart: Quickstart, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A copy of the quickstart project whose store file cannot be written, even by root
    (``chattr +i``; ``chmod`` for other users)."""
    target = tmp_path_factory.mktemp("read_only") / "proj"
    shutil.copytree(quickstart.root, target)
    db = target / ".agac" / "agac.db"
    with _read_only(db):
        yield target


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[None]:
    if os.geteuid() != 0:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)
        return
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.fail(f"cannot make {path} read-only for root (chattr +i): {made.stderr}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_json_error_of_a_stopped_run_is_its_summary_with_error(tmp_path: Path) -> None:
    """S2 through the CLI: a checkpoint that cannot be written stops the run; --json then
    prints that run's summary (state unchanged) with ``ok: false`` and the error."""
    from agac.store.repository import Store
    from agac.testing import write_project

    wf = """
name: wf
input: {path: data/, id_field: id}
defaults: {model: mock/m, max_concurrency: 4}
actions:
  - name: classify
    prompt: "{{ source.text }}"
"""
    write_project(
        tmp_path,
        wf,
        data={"data/a.jsonl": [{"id": f"r{i:03d}", "text": f"t{i}"} for i in range(60)]},
    )
    assert agac("store", "upgrade", cwd=tmp_path).code == 0
    store = Store(f"sqlite:///{tmp_path}/.agac/agac.db")
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TRIGGER agac_test_fail BEFORE INSERT ON outcomes WHEN "
            "NEW.unit_key = 'r040' BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END"
        )
    store.close()
    done = agac("run", "wf", "--json", cwd=tmp_path)
    assert done.code == 1 and "Traceback" not in done.err
    assert not SQL.search(done.out + done.err), done
    doc = done.json()
    assert doc["ok"] is False and doc["state"] == "running" and doc["workflow"] == "wf"
    assert doc["error"]["code"] == "store_error"
    assert "disk full (test)" in doc["error"]["message"]
    assert doc["run_id"] == agac("runs", "list", "--json", cwd=tmp_path).json()[0]["run_id"]


def test_a_reader_that_goes_away_is_not_an_error(tmp_path: Path) -> None:
    """``agac export … | head -1``: the export stops quietly (exit 1, nothing on stderr)."""
    from cli_support import AGAC, clean_env

    from agac.testing import write_project

    wf = """
name: wf
input: {path: data/}
defaults: {model: mock/m, max_concurrency: 16}
actions:
  - name: ask
    prompt: "{{ source.text }}"
"""
    write_project(
        tmp_path, wf, data={"data/a.jsonl": [{"text": "x" * 200 + str(i)} for i in range(3000)]}
    )
    assert agac("run", "wf", cwd=tmp_path, timeout=300).code == 0
    proc = subprocess.Popen(
        [*AGAC, "export", "wf", "--action", "ask"],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b'{"key": "a.jsonl:1"')
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=240) == 1
    assert err == "", err
