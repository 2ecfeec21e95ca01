"""Issue 29 item 15 through the real ``agac`` process: a prompt past the cap fails its unit
``prompt_too_large`` before anything is sent or stored (the emulator counts no request),
the other records run, and ``{{ "a" * 10**10 }}`` fails the same way with a message."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cli_support import agac

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WORKFLOW = """\
name: cap
input: {path: data/a.jsonl, id_field: id}
defaults: {max_prompt_chars: 2000}
actions:
  - name: ask
    model: openai/gpt-4o-mini
    prompt: "PROMPT"
"""


def _project(root: Path, prompt: str, rows: list[dict[str, object]]) -> None:
    write_project(root, WORKFLOW.replace("PROMPT", prompt), data={"data/a.jsonl": rows})


def test_i29_15_a_prompt_past_the_cap_is_never_sent(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    _project(
        tmp_path,
        "Say {{ source.text }}",
        [{"id": 1, "text": "hi"}, {"id": 2, "text": "x" * 5000}, {"id": 3, "text": "yo"}],
    )
    ran = agac("run", "cap", "--json", cwd=tmp_path, env=emulator.env())
    assert ran.code == 1, ran
    ask = ran.json()["actions"]["ask"]
    assert (ask["answered"], ask["failed"], ask["calls"]) == (2, 1, 2)
    assert ask["reasons"] == {"prompt_too_large": 1}
    assert len([e for e in emulator.requests() if e["op"] == "chat"]) == 2
    shown = agac("records", "show", "2", "--workflow", "cap", "--json", cwd=tmp_path).json()
    text = str(shown)
    assert "prompt_too_large" in text and "max_prompt_chars" in text
    with sqlite3.connect(tmp_path / ".agac" / "agac.db") as db:
        (answers,) = db.execute("select count(*) from answers").fetchone()
    assert answers == 2


def test_i29_15_a_huge_repetition_fails_the_unit_with_a_message(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    _project(tmp_path, '{{ \\"a\\" * 10**10 }}', [{"id": 1}])
    checked = agac("validate", "cap", cwd=tmp_path, env=emulator.env())
    assert checked.code == 0, checked
    ran = agac("run", "cap", "--json", cwd=tmp_path, env=emulator.env(), timeout=240)
    assert ran.code == 1, ran
    summary = ran.json()
    assert summary["actions"]["ask"]["reasons"] == {"prompt_too_large": 1}
    assert "MemoryError" not in ran.out + ran.err
    assert emulator.requests() == []
    shown = agac("records", "show", "1", "--workflow", "cap", cwd=tmp_path)
    assert "prompt_too_large" in shown.out and "max_prompt_chars" in shown.out, shown
