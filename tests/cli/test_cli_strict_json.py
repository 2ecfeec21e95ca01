"""Nothing that is not JSON is stored or exported (issue 29 items 12 and 13, X3), through
the real ``agac`` process.

Python's ``json`` writes ``NaN`` and ``Infinity`` and reads ``"\\ud800"`` into a lone
surrogate; a tool returning either used to be stored (NaN) or to wedge the run (the
surrogate, refused by the store at every checkpoint). Now the tool boundary refuses
both, failing the unit ``tool_error`` naming the field, and every export (per action and
wide, JSONL and CSV) and every ``--json`` document is strict JSON.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from cli_support import agac

from agac.testing import write_project

WORKFLOW = """\
name: values
input: {path: data/a.jsonl, id_field: id}
actions:
  - name: measure
    kind: tool
    function: tools.measure:measure
  - name: after
    kind: tool
    dependencies: [measure]
    function: tools.measure:after
"""

# Record 1 answers; the others return what JSON cannot hold, or raise with it.
TOOL = """\
def measure(inputs, ctx):
    i = inputs["source"]["id"]
    if i == 2:
        return {"score": float("nan")}
    if i == 3:
        return {"deep": [1, {"v": float("inf")}]}
    if i == 4:
        return {"low": -float("inf")}
    if i == 5:
        return {"name": "ab\\ud800"}
    if i == 6:
        raise ValueError("bad \\udc80 text")
    return {"score": 0.5, "n": i}

def after(inputs, ctx):
    return {"twice": inputs["measure"]["n"] * 2}
"""

EXPECTED = {
    "2": "the tool returned NaN at score",
    "3": "the tool returned Infinity at deep[1].v",
    "4": "the tool returned -Infinity at low",
    "5": "the tool returned a lone surrogate (\\ud800) at name",
    "6": "ValueError: bad \\udc80 text",
}


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses NaN and Infinity, as any strict JSON reader does."""
    return json.loads(text, parse_constant=_refuse_constant)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("values")
    write_project(
        root,
        WORKFLOW,
        data={"data/a.jsonl": [{"id": i} for i in range(1, 7)]},
        files={"tools/__init__.py": "", "tools/measure.py": TOOL},
    )
    result = agac("run", "values", "--json", cwd=root)
    assert result.code == 1, result  # some records failed
    doc = strict_loads(result.out)
    assert doc["state"] == "partial", result
    return root


def test_i29_12_tool_nan_and_infinity_fail_tool_error_naming_the_field(project: Path) -> None:
    rows = [
        strict_loads(line)
        for line in agac("export", "values", "--action", "measure", cwd=project).out.splitlines()
    ]
    by_key = {r["key"]: r for r in rows}
    assert by_key["1"]["status"] == "answered"
    for key in ("2", "3", "4"):
        assert (by_key[key]["status"], by_key[key]["reason"]) == ("failed", "tool_error")
        assert by_key[key]["detail"].startswith(EXPECTED[key]), by_key[key]
        assert "null or a finite number" in by_key[key]["detail"]
        assert by_key[key]["output"] is None


def test_i29_13_tool_lone_surrogate_fails_tool_error_and_the_run_ends(project: Path) -> None:
    """The run settles (``partial``), it is not left ``running``; a rerun has nothing to do."""
    rows = {
        r["key"]: r
        for r in (
            strict_loads(line)
            for line in agac(
                "export", "values", "--action", "measure", cwd=project
            ).out.splitlines()
        )
    }
    for key in ("5", "6"):
        assert (rows[key]["status"], rows[key]["reason"]) == ("failed", "tool_error")
        assert rows[key]["detail"].startswith(EXPECTED[key]), rows[key]
    status = agac("status", "values", "--json", cwd=project)
    assert status.code == 0 and strict_loads(status.out)["state"] == "partial", status
    again = agac("run", "values", "--json", cwd=project)
    assert strict_loads(again.out)["state"] == "partial", again
    assert "store" not in again.err, again


@pytest.mark.parametrize(
    "args",
    [
        ("--action", "measure", "--format", "jsonl"),
        ("--action", "after", "--format", "jsonl"),
        ("--all-actions", "--format", "jsonl"),
        ("--all-actions", "--include-source", "--format", "jsonl"),
    ],
    ids=["action-jsonl", "after-jsonl", "wide-jsonl", "wide-source-jsonl"],
)
def test_x3_every_jsonl_export_is_strict_json(project: Path, args: tuple[str, ...]) -> None:
    result = agac("export", "values", *args, cwd=project)

    assert result.code == 0, result
    rows = [strict_loads(line) for line in result.out.splitlines()]
    assert len(rows) == 6


@pytest.mark.parametrize(
    "args",
    [
        ("--action", "measure", "--format", "csv"),
        ("--all-actions", "--include-source", "--format", "csv"),
    ],
    ids=["action-csv", "wide-csv"],
)
def test_x3_every_csv_export_writes_strict_json_cells(project: Path, args: tuple[str, ...]) -> None:
    result = agac("export", "values", *args, cwd=project)

    assert result.code == 0, result
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert len(rows) == 6
    json_cells = [v for row in rows for v in row.values() if v[:1] in ("{", "[")]
    assert json_cells
    for cell in json_cells:
        strict_loads(cell)


def test_x3_json_documents_are_strict_json(project: Path) -> None:
    for args in (
        ("status", "values"),
        ("records", "show", "2", "--workflow", "values"),
        ("export", "values", "--action", "measure", "--out", "m.jsonl"),
    ):
        result = agac(*args, "--json", cwd=project)
        assert result.code == 0, result
        strict_loads(result.out)


def test_x3_a_stored_nan_stops_the_export_naming_the_record(tmp_path: Path) -> None:
    """A NaN an earlier agac stored is not written as ``NaN``: the export stops with a
    store error naming the record and the field."""
    root = tmp_path
    write_project(
        root,
        WORKFLOW,
        data={"data/a.jsonl": [{"id": 1}]},
        files={"tools/__init__.py": "", "tools/measure.py": TOOL},
    )
    assert agac("run", "values", cwd=root).code == 0
    with sqlite3.connect(root / ".agac" / "agac.db") as db:
        db.execute("""UPDATE outcomes SET output = '{"score":NaN,"n":1}'
                      WHERE output LIKE '%score%'""")

    for args in (
        ("--action", "measure"),
        ("--action", "measure", "--format", "csv"),
        ("--all-actions",),
        ("--all-actions", "--format", "csv"),
    ):
        result = agac("export", "values", *args, "--json", "--out", "x.out", cwd=root)
        assert result.code == 1, result
        error = strict_loads(result.out)["error"]
        assert error["code"] == "store_error", result
        assert "record '1'" in error["message"] and "NaN at" in error["message"], result
        assert "score" in error["message"], result
        assert not (root / "x.out").exists()
