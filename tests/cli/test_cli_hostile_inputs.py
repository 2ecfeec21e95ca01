"""Issue 29 item 19 through the real ``agac`` process: record keys with a newline, NUL,
ESC or bidi control are escaped in ``records list`` and ``records show``; a tool module
that hangs at import does not hang ``validate``; a YAML tab error says "tab"; and a FIFO
or a symlink to ``/dev/zero`` named ``*.yml`` is never read when a workflow is looked up
by name."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from cli_support import agac

from agac.testing import write_project

WORKFLOW = """\
name: keys
input: {path: data/a.jsonl, id_field: id}
actions:
  - name: ask
    model: mock/m
    prompt: "Say {{ source.text }}"
"""

KEYS = ["line\nbreak", "nul\x00key", "esc\x1b[2Jkey", "bidi\u202egnp.exe", "plain"]


def test_i29_19_record_keys_are_escaped_in_tables(tmp_path: Path) -> None:
    write_project(
        tmp_path, WORKFLOW, data={"data/a.jsonl": [{"id": key, "text": "hi"} for key in KEYS]}
    )
    assert agac("run", "keys", cwd=tmp_path).code == 0
    listed = agac("records", "list", "keys", cwd=tmp_path)
    assert listed.code == 0, listed
    lines = listed.out.splitlines()
    assert len(lines) == 2 + len(KEYS), listed.out  # header, rule, one line a unit
    for shown in ("line\\nbreak", "nul\\x00key", "esc\\x1b[2Jkey", "bidi\\u202egnp.exe"):
        assert shown in listed.out
    assert not any(c in listed.out for c in "\x00\x1b\u202e")
    shown = agac("records", "show", "line\nbreak", "--workflow", "keys", cwd=tmp_path)
    assert shown.code == 0, shown
    assert shown.out.splitlines()[0].startswith("record line\\nbreak of keys")
    json_doc = agac(
        "records", "show", "bidi\u202egnp.exe", "--workflow", "keys", "--json", cwd=tmp_path
    ).json()
    assert json_doc["key"] == "bidi\u202egnp.exe"  # JSON keeps the key as it is


def test_i29_19_a_tool_that_hangs_at_import_does_not_hang_validate(tmp_path: Path) -> None:
    write_project(
        tmp_path,
        """\
name: slow
input: {path: data/a.jsonl}
actions:
  - name: t
    kind: tool
    function: tools.slow:f
""",
        data={"data/a.jsonl": [{"x": 1}]},
        files={
            "tools/__init__.py": "",
            "tools/slow.py": "import time\ntime.sleep(600)\ndef f(inputs, ctx):\n    return {}\n",
        },
    )
    started = time.monotonic()
    checked = agac(
        "validate", "slow", "--json", cwd=tmp_path, timeout=400, env={"AGAC_IMPORT_TIMEOUT": "2"}
    )
    assert time.monotonic() - started < 300  # not the import's 600 s (margin: a loaded machine)
    assert checked.code == 2, checked
    (error,) = checked.json()["errors"]
    assert error["code"] == "invalid_function"
    assert "did not finish importing within 2 seconds" in error["message"]


def test_i29_19_a_yaml_tab_error_says_tab(tmp_path: Path) -> None:
    write_project(
        tmp_path,
        "name: tabs\ninput: {path: data/a.jsonl}\nactions:\n\t- name: a\n",
        data={"data/a.jsonl": [{"x": 1}]},
    )
    checked = agac("validate", "workflows/wf.yml", "--json", cwd=tmp_path)
    assert checked.code == 2, checked
    (error,) = checked.json()["errors"]
    assert error["code"] == "yaml_syntax" and error["line"] == 4
    assert "tab" in error["message"].lower()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_i29_19_a_fifo_or_a_device_named_yml_is_never_read(tmp_path: Path) -> None:
    write_project(tmp_path, WORKFLOW, data={"data/a.jsonl": [{"id": 1, "text": "hi"}]})
    os.mkfifo(tmp_path / "pipe.yml")
    (tmp_path / "deep").mkdir()
    os.symlink("/dev/zero", tmp_path / "deep" / "zero.yml")
    (tmp_path / "huge.yml").write_bytes(b"name: huge\n" + b"#" * (2 * 1024 * 1024))
    checked = agac("validate", "keys", cwd=tmp_path, timeout=240)
    assert checked.code == 0, checked
    missing = agac("validate", "nothing_by_this_name", cwd=tmp_path, timeout=240)
    assert missing.code == 2 and "workflow_not_found" in missing.err + missing.out, missing
