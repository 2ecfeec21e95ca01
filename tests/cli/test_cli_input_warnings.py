"""Input that would add nothing, or swallow rows, is reported at run too: an empty input
file is a warning (and in the run_admitted event), a CSV quote never closed fails its
record ``invalid_input`` naming the line instead of silently eating the rows after it."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.testing import write_project

WF = """
name: wf
input: {path: data/}
defaults: {model: mock/m}
actions:
  - name: ask
    prompt: "{{ source.text }}"
"""


def test_run_warns_about_an_empty_input_file(tmp_path: Path) -> None:
    write_project(
        tmp_path, WF, data={"data/a.jsonl": [{"text": "x"}]}, files={"data/b.csv": "id,text\n"}
    )
    done = agac("run", "wf", "--json", cwd=tmp_path)
    assert done.code == 0, done
    assert (
        "data/b.csv:1: warning: input file holds no records (a CSV may have only its "
        "header); it adds nothing to the run [empty_input]"
    ) in done.err
    admitted = [
        e
        for e in agac("events", "wf", "--json", cwd=tmp_path).json()
        if e["kind"] == "run_admitted"
    ]
    assert admitted[0]["data"]["empty_files"] == ["data/b.csv"]
    assert "warning" in agac("validate", "wf", cwd=tmp_path).err


def test_run_fails_the_record_of_an_unclosed_csv_quote(tmp_path: Path) -> None:
    write_project(tmp_path, WF, files={"data/a.csv": 'text\nfine\n"oops\nswallowed\nalso\n'})
    done = agac("run", "wf", "--json", cwd=tmp_path)
    assert done.code == 1, done
    ask = done.json()["actions"]["ask"]
    assert (ask["records"], ask["answered"], ask["reasons"]) == (2, 1, {"invalid_input": 1})
    rows = agac("records", "list", "wf", "--status", "failed", "--json", cwd=tmp_path).json()
    (row,) = rows["units"]
    assert row["detail"].startswith(
        "a.csv:3: a quoted field opens on this line and is never "
        "closed: everything to the end of the file (line 5)"
    )
