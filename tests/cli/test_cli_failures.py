"""Failures through the CLI: bad input, raising tools, provider errors, retry, crashes,
a lease held by a live run, Ctrl-C, and the exit codes of docs/guarantees.md, Runs (0/1/2/75/130)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from cli_support import agac, finish, spawn

from agac.testing import write_project

MIXED = """\
name: mixed
input: {path: data/a.jsonl, id_field: id}
defaults: {model: mock/m, retry: {max_attempts: 2, backoff: {initial: 10ms}}}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
  - name: check
    kind: tool
    dependencies: [ask]
    function: tools.check:check
"""

CHECK_TOOL = """\
def check(inputs, ctx):
    if inputs["source"]["id"] == 2:
        raise ValueError("record two is rejected")
    return {"ok": inputs["source"]["id"]}
"""

MIXED_ROWS = [
    {"id": 1, "text": "one"},
    {"id": 2, "text": "two"},
    '{"id": 3, "text": ',  # malformed: line 3
    {"id": 4, "text": "four"},
]

LONG = """\
name: long
input: {path: data/many.jsonl, id_field: id}
defaults: {model: mock/m, max_concurrency: 8, retry: {backoff: {initial: 10ms}}}
actions:
  - name: first
    prompt: "Say {{ source.text }}"
  - name: second
    dependencies: [first]
    prompt: "Again: {{ first.text }}"
"""

MANY_ROWS = [{"id": i, "text": f"text {i}"} for i in range(200)]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """A run with a malformed input line and a tool that raises for one record."""
    root = tmp_path_factory.mktemp("mixed")
    write_project(
        root,
        MIXED,
        data={"data/a.jsonl": MIXED_ROWS},
        files={"tools/__init__.py": "", "tools/check.py": CHECK_TOOL},
    )
    result = agac("run", "mixed", "--json", cwd=root)
    assert result.code == 1, result
    return root, result.json()


def test_partial_run_exits_1_and_names_retry(mixed: tuple[Path, dict[str, object]]) -> None:
    _, doc = mixed
    assert doc["state"] == "partial"
    assert doc["next"] == "agac retry mixed"
    actions = doc["actions"]
    assert isinstance(actions, dict)
    assert actions["ask"]["records"] == 4
    assert (actions["ask"]["answered"], actions["ask"]["failed"]) == (3, 1)
    assert actions["ask"]["reasons"] == {"invalid_input": 1}
    assert (
        actions["check"]["answered"],
        actions["check"]["failed"],
        actions["check"]["skipped"],
    ) == (2, 1, 1)
    assert actions["check"]["reasons"] == {"tool_error": 1, "upstream_failed": 1}
    # two answered, one attempt of the raising one: a ValueError fails the same way every
    # time, so it is not retried (only agac.RetryableError is)
    assert actions["check"]["calls"] == 0 and actions["check"]["tool_calls"] == 2 + 1


def test_partial_run_summary_line_names_retry(mixed: tuple[Path, dict[str, object]]) -> None:
    root, doc = mixed
    result = agac("status", str(doc["run_id"]), cwd=root)
    assert result.code == 0, result
    assert result.out.splitlines()[-1].endswith("2 failed: agac retry mixed")


def test_malformed_line_is_failed_invalid_input_in_export(
    mixed: tuple[Path, dict[str, object]],
) -> None:
    root, _ = mixed
    result = agac("export", "mixed", "--action", "ask", cwd=root)
    assert result.code == 0, result
    rows = {r["key"]: r for r in map(json.loads, result.out.splitlines())}
    assert len(rows) == 4
    bad = rows["a.jsonl:3"]
    assert (bad["status"], bad["reason"], bad["output"]) == ("failed", "invalid_input", None)
    assert "a.jsonl:3" in bad["detail"]
    downstream = agac("export", "mixed", "--action", "check", "--format", "csv", cwd=root)
    assert "a.jsonl:3,skipped,upstream_failed," in downstream.out
    assert "\n2,failed,tool_error,ValueError: record two is rejected," in downstream.out


def test_malformed_line_in_records_show(mixed: tuple[Path, dict[str, object]]) -> None:
    root, _ = mixed
    doc = agac("records", "show", "a.jsonl:3", "--json", cwd=root).json()
    assert doc["status"] == "failed"
    assert doc["record"]["line"] == 3 and doc["record"]["reason"] == "invalid_input"
    assert "a.jsonl:3" in doc["record"]["error"]
    by_action = {a["action"]: a for a in doc["actions"]}
    assert (by_action["ask"]["status"], by_action["ask"]["reason"]) == ("failed", "invalid_input")
    assert (by_action["check"]["status"], by_action["check"]["reason"]) == (
        "skipped",
        "upstream_failed",
    )
    text = agac("records", "show", "a.jsonl:3", cwd=root)
    assert "from a.jsonl line 3" in text.out and "invalid: a.jsonl:3" in text.out


def test_raising_tool_keeps_traceback_in_session(mixed: tuple[Path, dict[str, object]]) -> None:
    root, _ = mixed
    doc = agac("records", "show", "2", "--workflow", "mixed", "--json", cwd=root).json()
    check = next(a for a in doc["actions"] if a["action"] == "check")
    assert (check["status"], check["reason"]) == ("failed", "tool_error")
    assert check["detail"] == "ValueError: record two is rejected"
    assert check["attempts"] and all(t["status"] == "error" for t in check["attempts"])
    [error] = doc["errors"]
    assert error["data"]["reason"] == "tool_error"
    assert "Traceback (most recent call last)" in error["data"]["traceback"]
    assert 'raise ValueError("record two is rejected")' in error["data"]["traceback"]
    text = agac("records", "show", "2", cwd=root)
    assert text.code == 0, text
    assert "check: failed (tool_error)" in text.out
    assert "Traceback (most recent call last)" in text.out


def test_retry_dry_run_lists_failed_units(mixed: tuple[Path, dict[str, object]]) -> None:
    root, doc = mixed
    result = agac("retry", "mixed", "--dry-run", "--json", cwd=root)
    assert result.code == 0, result
    plan = result.json()
    assert plan["retry_of"] == doc["run_id"] and plan["workflow"] == "mixed"
    assert {(u["action"], u["key"]) for u in plan["units"]} == {
        ("ask", "a.jsonl:3"),
        ("check", "2"),
    }
    text = agac("retry", "mixed", "--dry-run", "--action", "check", cwd=root)
    assert text.code == 0, text
    assert text.out.splitlines()[0].startswith(f"would retry 1 failed units of run {doc['run_id']}")
    assert text.out.splitlines()[1].split() == ["action", "key"]
    assert text.out.splitlines()[3].split() == ["check", "2"]


def test_retry_reasks_failed_units_only(tmp_path: Path) -> None:
    write_project(
        tmp_path,
        MIXED,
        data={"data/a.jsonl": MIXED_ROWS},
        files={"tools/__init__.py": "", "tools/check.py": CHECK_TOOL},
    )
    first = agac("run", "mixed", "--json", cwd=tmp_path)
    assert first.code == 1, first
    (tmp_path / "tools" / "check.py").write_text(
        "def check(inputs, ctx):\n    return {'ok': inputs['source']['id']}\n", encoding="utf-8"
    )
    result = agac("retry", "mixed", "--action", "check", "--record", "2", "--json", cwd=tmp_path)
    assert result.code == 1, result  # the malformed line still fails
    doc = result.json()
    assert doc["retry_of"] == first.json()["run_id"]
    check = doc["actions"]["check"]
    assert (check["answered"], check["failed"], check["skipped"]) == (3, 0, 1)
    assert doc["actions"]["ask"]["calls"] == 0
    # only the malformed line still fails: a retry cannot fix it, a new run after the fix can
    assert doc["next"] == "agac run mixed"


def test_provider_failures_fail_the_run(tmp_path: Path) -> None:
    write_project(tmp_path, LONG, data={"data/many.jsonl": MANY_ROWS[:3]})
    result = agac("run", "long", "--json", cwd=tmp_path, env={"AGAC_MOCK_FAIL_RATE": "1"})
    assert result.code == 1, result
    doc = result.json()
    assert doc["state"] == "failed" and doc["next"] == "agac retry long"
    assert doc["actions"]["first"]["reasons"] == {"provider_error": 3}
    assert doc["actions"]["second"]["reasons"] == {"upstream_failed": 3}
    assert "\x1b" not in result.err


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A run killed (SIGKILL) after its second checkpoint: left open, mid-way."""
    root = tmp_path_factory.mktemp("crashed")
    write_project(root, LONG, data={"data/many.jsonl": MANY_ROWS})
    killed = agac(
        "run",
        "long",
        "--json",
        cwd=root,
        env={"AGAC_CRASH_AT": "after_checkpoint:6", "AGAC_MOCK_LATENCY_MS": "20"},
    )
    assert killed.code == -signal.SIGKILL, killed
    assert killed.out == ""
    [row] = agac("runs", "list", "--json", cwd=root).json()
    assert row["state"] == "running"
    return root, row["run_id"]


def test_retry_while_a_run_is_open_exits_2(crashed: tuple[Path, str]) -> None:
    root, run_id = crashed
    doc = agac("status", "long", "--json", cwd=root).json()
    assert doc["run_id"] == run_id and doc["state"] == "running"
    assert 0 < doc["actions"]["first"]["pending"] < 200
    assert doc["next"] == "agac run long"
    refused = agac("retry", "long", cwd=root)
    assert refused.code == 2, refused
    assert run_id in refused.err and "agac run long" in refused.err
    as_json = agac("retry", "long", "--json", cwd=root)
    assert as_json.code == 2, as_json
    assert as_json.json()["ok"] is False


def test_run_continues_the_crashed_run(crashed: tuple[Path, str]) -> None:
    root, run_id = crashed
    result = agac("run", "long", "--json", cwd=root)
    assert result.code == 0, result
    assert f"continuing run {run_id}" in result.err
    doc = result.json()
    assert doc["run_id"] == run_id and doc["state"] == "succeeded"
    # Each record is answered by one call; the calls whose outcome the kill lost are
    # counted apart, at most one per unit a dispatch mark listed (S1: twice the action's
    # max_concurrency of 8, so 16).
    first = doc["actions"]["first"]
    assert first["calls"] - first["unknown_calls"] == 200, first
    assert 0 <= first["unknown_calls"] <= 16, first
    assert doc["actions"]["second"]["answered"] == 200


def _wait_until_running(root: Path, deadline: float, *, answered: int = 0) -> str:
    """The id of the workflow's run once it is ``running`` (its owner took the lease first)
    with more than ``answered`` units answered: its owner is in its loop, calling."""
    while time.monotonic() < deadline:
        rows = agac("runs", "list", "--json", cwd=root).json() if (root / ".agac").exists() else []
        if (
            rows
            and rows[0]["state"] == "running"
            and (
                not answered
                or sum(
                    a["answered"]
                    for a in agac("status", "long", "--json", cwd=root).json()["actions"].values()
                )
                > answered
            )
        ):
            return str(rows[0]["run_id"])
        time.sleep(0.1)
    raise AssertionError("the run did not start")


LIVE_ROWS = [{"id": i, "text": f"text {i}"} for i in range(1000)]


def test_live_owner_exits_75_and_ctrl_c_exits_130(tmp_path: Path) -> None:
    write_project(tmp_path, LONG, data={"data/many.jsonl": LIVE_ROWS})
    # 1,000 records x 2 actions, 8 in flight at 500 ms a call: over two minutes of calls,
    # so the owner is still running whatever the second `agac run` takes to start on a
    # busy machine; a first Ctrl-C settles the 8 in flight (~0.5 s) and exits.
    proc = spawn("run", "long", cwd=tmp_path, env={"AGAC_MOCK_LATENCY_MS": "500"})
    try:
        run_id = _wait_until_running(tmp_path, time.monotonic() + 60, answered=8)
        busy = agac("run", "long", cwd=tmp_path)
        assert busy.code == 75, busy
        assert f"run {run_id} is owned by pid {proc.pid}" in busy.err
        assert "--wait" in busy.err
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=240)
    finally:
        finish(proc)
    assert proc.returncode == 130, (out, err)
    assert "stopping: settling calls in flight" in err
    assert "\x1b" not in err
    assert out.splitlines()[-1].endswith("interrupted: what was in flight is saved: agac run long")
    resumed = agac("run", "long", "--json", cwd=tmp_path, timeout=300)
    assert resumed.code == 0, resumed
    assert resumed.json()["run_id"] == run_id
