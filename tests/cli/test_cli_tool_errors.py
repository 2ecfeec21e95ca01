"""User code cannot take agac down (issue 12 item 3), through the real ``agac`` process.

A tool that calls ``sys.exit(0)`` used to end agac with exit 0 and no output, leaving the
run ``running``; ``sys.exit(3)`` gave asyncio tracebacks on every rerun. Now any
exception a tool raises — ``BaseException`` included — fails that unit ``tool_error``
naming the exception, and the run goes on; only ``agac.RetryableError`` is retried; the
stored text has its secrets redacted.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cli_support import agac

from agac.testing import write_project

WORKFLOW = """\
name: tools
input: {path: data/a.jsonl, id_field: id}
defaults: {retry: {max_attempts: 3, backoff: {initial: 10ms, max: 20ms}}}
actions:
  - name: check
    kind: tool
    function: tools.check:check
  - name: after
    kind: tool
    dependencies: [check]
    function: tools.check:after
"""

ROWS = [{"id": 1}, {"id": 2}, {"id": 3}]

# `RAISE` is the statement record 2's call runs.
TOOL = """\
import asyncio, os, sys
import agac

def check(inputs, ctx):
    if inputs["source"]["id"] == 2:
        {RAISE}
    return {{"ok": inputs["source"]["id"]}}

async def check_async(inputs, ctx):
    return check(inputs, ctx)

def after(inputs, ctx):
    return {{"after": inputs["check"]["ok"]}}

class Custom(BaseException):
    pass
"""


def _project(root: Path, statement: str, *, is_async: bool = False) -> Path:
    workflow = (
        WORKFLOW.replace("tools.check:check", "tools.check:check_async") if is_async else WORKFLOW
    )
    write_project(
        root,
        workflow,
        data={"data/a.jsonl": ROWS},
        files={"tools/__init__.py": "", "tools/check.py": TOOL.format(RAISE=statement)},
    )
    return root


def _no_crash_output(stderr: str) -> None:
    for said in ("Traceback", "Task was destroyed", "was never retrieved", "Exception ignored"):
        assert said not in stderr, stderr


@pytest.mark.parametrize("code", [0, 3])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_tool_sys_exit_fails_unit_tool_error(tmp_path: Path, code: int, is_async: bool) -> None:
    root = _project(tmp_path, f"sys.exit({code})", is_async=is_async)

    result = agac("run", "tools", "--json", cwd=root)

    assert result.code == 1, result
    _no_crash_output(result.err)
    doc = result.json()
    assert doc["state"] == "partial"
    check = doc["actions"]["check"]
    assert (check["answered"], check["failed"], check["tool_calls"]) == (2, 1, 3)
    assert check["reasons"] == {"tool_error": 1}
    assert doc["actions"]["after"]["reasons"] == {"upstream_failed": 1}
    rows = {
        r["key"]: r for r in agac("export", "tools", "--action", "check", cwd=root).json_lines()
    }
    assert rows["2"]["detail"] == f"SystemExit: {code}"
    # The next run (a final run is never resumed: a new one, carrying the failure) is clean.
    again = agac("run", "tools", "--json", cwd=root)
    assert again.code == 1, again
    _no_crash_output(again.err)
    assert again.json()["actions"]["check"]["reasons"] == {"tool_error": 1}


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("raise Custom('mine')", "Custom: mine"),
        ("raise asyncio.CancelledError('by the tool')", "CancelledError: by the tool"),
        ("raise SystemExit", "SystemExit: None"),
    ],
)
def test_tool_base_exception_fails_unit_tool_error(
    tmp_path: Path, statement: str, named: str
) -> None:
    """A BaseException of the tool's own — a CancelledError agac did not ask for
    included — fails that unit; the run goes on."""
    root = _project(tmp_path, statement, is_async=True)

    result = agac("run", "tools", "--json", cwd=root)

    assert result.code == 1, result
    _no_crash_output(result.err)
    check = result.json()["actions"]["check"]
    assert (check["answered"], check["failed"]) == (2, 1)
    rows = {
        r["key"]: r for r in agac("export", "tools", "--action", "check", cwd=root).json_lines()
    }
    assert rows["2"]["detail"] == named


@pytest.mark.parametrize(
    "statement", ["raise KeyError('text')", "raise TypeError('no')", "raise ValueError('bad')"]
)
def test_tool_deterministic_error_is_not_retried(tmp_path: Path, statement: str) -> None:
    root = _project(tmp_path, statement)

    doc = agac("run", "tools", "--json", cwd=root).json()

    check = doc["actions"]["check"]
    assert (check["failed"], check["tool_calls"]) == (1, 2 + 1)  # one attempt, not three
    session = agac("records", "show", "2", "--workflow", "tools", "--json", cwd=root).json()
    attempts = next(a for a in session["actions"] if a["action"] == "check")["attempts"]
    assert len(attempts) == 1


def test_tool_retryable_error_is_retried(tmp_path: Path) -> None:
    """``agac.RetryableError`` asks for another attempt: twice busy, then an answer."""
    statement = (
        "n = int(open('tries').read()) if os.path.exists('tries') else 0\n"
        "        open('tries', 'w').write(str(n + 1))\n"
        "        if n < 2:\n"
        "            raise agac.RetryableError('the service is busy')"
    )
    root = _project(tmp_path, statement)

    doc = agac("run", "tools", "--json", cwd=root).json()

    check = doc["actions"]["check"]
    assert doc["state"] == "succeeded", doc
    assert (check["answered"], check["tool_calls"]) == (3, 2 + 3)


def test_tool_retryable_error_fails_after_the_last_attempt(tmp_path: Path) -> None:
    root = _project(tmp_path, "raise agac.RetryableError('still busy')")

    doc = agac("run", "tools", "--json", cwd=root).json()

    check = doc["actions"]["check"]
    assert (check["failed"], check["tool_calls"]) == (1, 2 + 3)
    rows = {
        r["key"]: r for r in agac("export", "tools", "--action", "check", cwd=root).json_lines()
    }
    assert rows["2"]["detail"] == "RetryableError: still busy"


SECRET = "sk-live-0123456789abcdefghijklmnop"  # an OpenAI-shaped key, in the environment
PLAIN = "correct-horse-battery-staple-42"  # a key of no known shape, in the environment


def test_tool_error_text_redacts_secrets(tmp_path: Path) -> None:
    """The tool's exception text and traceback are stored with the configured providers'
    keys (their actual values), key shapes and Authorization values redacted: not in the
    export, the session, the events, nor anywhere in the store file."""
    statement = (
        "raise ValueError('called with ' + os.environ['OPENAI_API_KEY'] + ' and '"
        " + os.environ['ANTHROPIC_API_KEY'] + ', header ' + os.environ['HEADER'])"
    )
    root = _project(tmp_path, statement)
    # HEADER is no secret's variable: only the shapes in its value are known.
    env = {
        "OPENAI_API_KEY": SECRET,
        "ANTHROPIC_API_KEY": PLAIN,
        "HEADER": "Authorization: Bearer tok3n-abcdef-123456 and gsk_ABCDEFGHIJKLMNOPQRSTUVWX",
    }

    result = agac("run", "tools", "--json", cwd=root, env=env)

    assert result.code == 1, result
    rows = {
        r["key"]: r for r in agac("export", "tools", "--action", "check", cwd=root).json_lines()
    }
    detail = rows["2"]["detail"]
    assert detail == (
        "ValueError: called with [redacted] and [redacted], header "
        "Authorization: Bearer [redacted] and [redacted]"
    )
    session = agac("records", "show", "2", "--workflow", "tools", "--json", cwd=root)
    events = agac("events", result.json()["run_id"], "--json", cwd=root)
    assert events.code == 0, events
    store = (root / ".agac" / "agac.db").read_bytes()
    for wal in (root / ".agac").glob("agac.db-wal"):
        store += wal.read_bytes()
    for secret in (SECRET, PLAIN, "tok3n-abcdef-123456", "gsk_ABCDEFGHIJKLMNOPQRSTUVWX"):
        assert secret not in session.out and secret not in events.out
        assert secret.encode() not in store
    assert "[redacted]" in session.json()["errors"][0]["data"]["traceback"]
    with sqlite3.connect(root / ".agac" / "agac.db") as db:
        errors = [r[0] for r in db.execute("SELECT error FROM usage WHERE status = 'error'")]
    assert errors and all("[redacted]" in e for e in errors)


def test_tool_module_sys_exit_at_import_is_invalid_function(tmp_path: Path) -> None:
    """Importing a tool module runs its top-level code: sys.exit there is a located
    validation error, not agac ending with the tool's exit code."""
    root = _project(tmp_path, "pass")
    module = root / "tools" / "check.py"
    module.write_text("import sys\nsys.exit(0)\n" + module.read_text())

    result = agac("validate", "tools", "--json", cwd=root)

    assert result.code == 2, result
    _no_crash_output(result.err)
    [problem, *_] = result.json()["errors"]
    assert problem["code"] == "invalid_function"
    assert "cannot import 'tools.check': SystemExit: 0" in problem["message"]
