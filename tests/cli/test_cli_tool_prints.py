"""A tool's prints never reach ``--json``'s stdout (issue 29 item 11), through the real
``agac`` process: what a tool module prints at import, and what a tool prints, writes to
file descriptor 1 or lets a subprocess write when called, goes to stderr; stdout holds
exactly the one JSON document."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.testing import write_project

WORKFLOW = """\
name: prints
input: {path: data/a.jsonl, id_field: id}
actions:
  - name: loud
    kind: tool
    function: tools.loud:loud
  - name: loud_async
    kind: tool
    dependencies: [loud]
    function: tools.loud:loud_async
"""

TOOL = """\
import os, subprocess, sys
print("printed at import")

def loud(inputs, ctx):
    # One string per print: two units print at once from their worker threads, and
    # print() writes its arguments separately, so "a", "b" could interleave with the other's.
    print(f"printed at call {inputs['source']['id']}")
    sys.stdout.write("written at call\\n")
    sys.stdout.flush()
    os.write(1, b"fd 1 at call\\n")
    subprocess.run([sys.executable, "-c", "print('child at call')"], check=True)
    return {"id": inputs["source"]["id"]}

async def loud_async(inputs, ctx):
    print("printed by the async tool")
    return {"again": inputs["loud"]["id"]}
"""


def _project(root: Path) -> Path:
    write_project(
        root,
        WORKFLOW,
        data={"data/a.jsonl": [{"id": 1}, {"id": 2}]},
        files={"tools/__init__.py": "", "tools/loud.py": TOOL},
    )
    return root


def test_i29_11_tool_prints_at_import_and_call_go_to_stderr(tmp_path: Path) -> None:
    root = _project(tmp_path)

    result = agac("run", "prints", "--json", cwd=root)

    assert result.code == 0, result
    doc = result.json()  # the whole of stdout is one JSON document
    assert doc["state"] == "succeeded"
    assert doc["actions"]["loud_async"]["answered"] == 2
    for said in (
        "printed at import",
        "printed at call 1",
        "printed at call 2",
        "written at call",
        "fd 1 at call",
        "child at call",
        "printed by the async tool",
    ):
        assert said in result.err, result
        assert said not in result.out


def test_i29_11_validate_json_keeps_import_prints_off_stdout(tmp_path: Path) -> None:
    root = _project(tmp_path)

    result = agac("validate", "prints", "--json", cwd=root)

    assert result.code == 0, result
    assert result.json()["ok"] is True
    assert "printed at import" in result.err


def test_i29_11_human_run_prints_of_tools_go_to_stderr(tmp_path: Path) -> None:
    root = _project(tmp_path)

    result = agac("run", "prints", cwd=root)

    assert result.code == 0, result
    assert "printed at call 1" in result.err and "printed at call 1" not in result.out
    assert "succeeded" in result.out
