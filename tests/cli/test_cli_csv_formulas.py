"""CSV exports are neutralized against formula injection (issue 29 item 14, X4), through the
real ``agac`` process and the Python API.

A cell a spreadsheet would run — starting with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return — used to be written as it was, whether it came from a source field, a
record key or a model's answer. Now it gets a leading ``'`` (OWASP) in the per-action and
the wide CSV alike, so a key reads the same in both; a plain number (``-5``) is kept;
``--no-escape-formulas`` / ``escape_formulas=False`` writes cells verbatim.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from cli_support import agac

from agac import api
from agac.data.export import FORMULA_STARTS
from agac.testing import write_project

ATTACK = '=HYPERLINK("http://evil.example","click")'

WORKFLOW = f"""\
name: cells
input: {{path: data/a.jsonl, id_field: id}}
actions:
  - name: ask
    model: mock/m1
    prompt: "Read {{{{ source.note }}}}"
    schema:
      type: object
      properties: {{formula: {{const: {ATTACK!r}}}}}
      required: [formula]
  - name: tool
    kind: tool
    function: tools.cells:cell
    schema:
      type: object
      properties: {{cell: {{type: string}}, n: {{type: integer}}}}
"""

TOOL = """\
def cell(inputs, ctx):
    return {"cell": "@SUM(A1:A9)", "n": -5}
"""

RECORDS = [
    {"id": "=1+1", "note": "+cmd|' /C calc'!A0"},
    {"id": "-2+3", "note": "\tleading tab"},
    {"id": "@me", "note": "\rleading carriage return"},
    {"id": "-5", "note": "-5"},
    {"id": "plain", "note": "nothing to see"},
]

NEUTRALIZED_KEYS = {"'=1+1", "'-2+3", "'@me", "-5", "plain"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cells")
    write_project(
        root,
        WORKFLOW,
        data={"data/a.jsonl": RECORDS},
        files={"tools/__init__.py": "", "tools/cells.py": TOOL},
    )
    result = agac("run", "cells", "--json", cwd=root)
    assert result.code == 0, result
    return root


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


def _export(project: Path, *args: str) -> str:
    """``agac export … --format csv`` into a file, read back as written (stdout through a
    text pipe would turn a carriage return into a newline)."""
    out = project / "out.csv"
    result = agac("export", "cells", *args, "--format", "csv", "--out", str(out), cwd=project)
    assert result.code == 0, result
    with out.open(encoding="utf-8", newline="") as handle:
        return handle.read()


def _runnable(cell: str) -> bool:
    """What a spreadsheet would run: a formula start, and not a plain number."""
    if not cell.startswith(FORMULA_STARTS):
        return False
    try:
        float(cell)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize(
    "args",
    [
        ("--action", "ask"),
        ("--action", "tool"),
        ("--all-actions",),
        ("--all-actions", "--include-source"),
        ("--action", "tool", "--include-source"),
    ],
    ids=["ask", "tool", "wide", "wide-source", "tool-source"],
)
def test_x4_no_csv_cell_can_run_as_a_formula(project: Path, args: tuple[str, ...]) -> None:
    rows = list(csv.reader(io.StringIO(_export(project, *args), newline="")))
    assert len(rows) == 1 + len(RECORDS)
    runnable = [cell for row in rows for cell in row if _runnable(cell)]
    assert runnable == [], runnable


def test_i29_14_keys_read_the_same_in_per_action_and_wide_csv(project: Path) -> None:
    per_action = _csv(_export(project, "--action", "ask"))
    wide = _csv(_export(project, "--all-actions"))

    assert {r["key"] for r in per_action} == NEUTRALIZED_KEYS
    assert [r["key"] for r in per_action] == [r["key"] for r in wide]


def test_i29_14_source_fields_keys_and_model_output_are_neutralized(project: Path) -> None:
    wide = _csv(_export(project, "--all-actions", "--include-source"))
    by_key = {r["key"]: r for r in wide}

    assert by_key["'=1+1"]["source.id"] == "'=1+1"
    assert by_key["'=1+1"]["source.note"] == "'+cmd|' /C calc'!A0"
    assert by_key["'-2+3"]["source.note"] == "'\tleading tab"
    assert by_key["'@me"]["source.note"] == "'\rleading carriage return"
    assert by_key["-5"]["source.note"] == "-5"  # a plain number runs nothing
    assert by_key["plain"]["source.note"] == "nothing to see"
    assert {r["ask.formula"] for r in wide} == {"'" + ATTACK}  # the model's answer
    assert {r["tool.cell"] for r in wide} == {"'@SUM(A1:A9)"}
    assert {r["tool.n"] for r in wide} == {"-5"}


def test_i29_14_no_escape_formulas_writes_cells_verbatim(project: Path) -> None:
    per_action = _csv(_export(project, "--action", "ask", "--no-escape-formulas"))
    wide = _csv(_export(project, "--all-actions", "--include-source", "--no-escape-formulas"))

    assert {r["key"] for r in per_action} == {r["id"] for r in RECORDS}
    assert {r["source.note"] for r in wide} == {r["note"] for r in RECORDS}
    assert {r["ask.formula"] for r in wide} == {ATTACK}


def test_i29_14_jsonl_exports_are_not_escaped(project: Path) -> None:
    """Escaping is for spreadsheets: JSON keeps the values exactly."""
    result = agac("export", "cells", "--action", "ask", cwd=project)
    assert '"key": "=1+1"' in result.out


def test_i29_14_python_api_escape_formulas(project: Path) -> None:
    escaped, verbatim = project / "escaped.csv", project / "verbatim.csv"
    api.export_table("cells", escaped, format="csv", include_source=True, project=project)
    api.export_table(
        "cells", verbatim, format="csv", include_source=True, project=project, escape_formulas=False
    )
    action_escaped, action_verbatim = project / "a1.csv", project / "a2.csv"
    api.export_action("cells", "tool", action_escaped, format="csv", project=project)
    api.export_action(
        "cells", "tool", action_verbatim, format="csv", project=project, escape_formulas=False
    )

    assert {r["key"] for r in _csv(escaped.read_text())} == NEUTRALIZED_KEYS
    assert {r["key"] for r in _csv(verbatim.read_text())} == {r["id"] for r in RECORDS}
    assert {r["key"] for r in _csv(action_escaped.read_text())} == NEUTRALIZED_KEYS
    assert {r["key"] for r in _csv(action_verbatim.read_text())} == {r["id"] for r in RECORDS}
