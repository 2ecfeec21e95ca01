"""Lists in the terminal are tables with a header row whose columns line up whatever the
length of the names in them; into a pipe they are plain text, never wrapped."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from agac.cli.main import cli
from agac.testing import write_project

LONG = "a_workflow_with_a_name_much_longer_than_any_column_width"
ACTION = "an_action_with_a_rather_long_name_too"
WF = f"""
name: {LONG}
input: {{path: data/}}
defaults: {{model: mock/m}}
actions:
  - name: {ACTION}
    prompt: "{{{{ source.text }}}}"
  - name: b
    dependencies: [{ACTION}]
    prompt: "Again: {{{{ source.text }}}}"
"""


def _table(stdout: str) -> tuple[str, str, list[str]]:
    """(header, rule, rows) of the first table in ``stdout``."""
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line and set(line) == {"─"})
    rows = []
    for line in lines[at + 1 :]:
        if "   " not in line:  # the table ends where plain text starts
            break
        rows.append(line)
    return lines[at - 1], lines[at], rows


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_project(tmp_path, WF, data={"data/a.jsonl": [{"text": f"t{i}"} for i in range(3)]})
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(cli, ["run", LONG]).exit_code == 0
    return tmp_path


@pytest.mark.parametrize(
    ("args", "first"),
    [
        (["runs", "list"], "run"),
        (["cost"], "action"),
        (["events"], "id"),
        (["plan", LONG], "action"),
        (["records", "list", LONG], "key"),
        (["status"], "action"),
    ],
)
def test_tables_have_headers_and_aligned_columns(
    project: Path, args: list[str], first: str
) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    header, rule, rows = _table(result.stdout)
    assert header.split()[0] == first and rows
    assert "\x1b" not in result.stdout  # a pipe gets no terminal codes
    assert all(line == line.rstrip() for line in (header, *rows))
    assert all(len(row) <= len(rule) for row in rows)  # nothing spills past its column


def test_a_long_name_does_not_shift_the_columns(project: Path) -> None:
    header, _rule, rows = _table(CliRunner().invoke(cli, ["cost"]).stdout)
    assert any(row.startswith(ACTION) for row in rows) and any(row.startswith("b ") for row in rows)
    tier = header.index("tier")
    assert {row[tier : tier + 4] for row in rows} == {"live"}
    calls_end = header.index("calls") + len("calls")
    assert all(row[calls_end - 1].isdigit() for row in rows)  # right-aligned under its header


def test_runs_list_keeps_a_long_workflow_name_whole(project: Path) -> None:
    header, _rule, rows = _table(CliRunner().invoke(cli, ["runs", "list"]).stdout)
    state = header.index("state")
    assert LONG in rows[0] and rows[0][state:].startswith("succeeded")
