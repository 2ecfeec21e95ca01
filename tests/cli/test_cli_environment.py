"""Issue 29 item 17: settings from the environment are checked like ``agac.yml``'s — the
same ranges, a named error naming the variable (exit 2), never "unexpected ValueError …
a bug in agac" — and a store URL is one of the documented forms or refused with the forms
listed, creating no file; ``agac status`` says which store it read."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import agac

from agac.testing import write_project

WORKFLOW = """\
name: env
input: {path: data/a.jsonl, id_field: id}
actions:
  - name: ask
    model: mock/m
    prompt: "Say {{ source.text }}"
"""


def _project(root: Path, agac_yml: str = "") -> Path:
    write_project(
        root, WORKFLOW, data={"data/a.jsonl": [{"id": 1, "text": "hi"}]}, agac_yml=agac_yml
    )
    return root


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("AGAC_MOCK_LATENCY_MS", "abc", "AGAC_MOCK_LATENCY_MS must be a number >= 0, got 'abc'"),
        ("AGAC_MOCK_FAIL_RATE", "7", "AGAC_MOCK_FAIL_RATE must be a number >= 0 and <= 1, got '7'"),
        ("AGAC_MOCK_FAIL_RATE", "nan", "AGAC_MOCK_FAIL_RATE must be a number"),
        ("AGAC_RATE_WINDOW_SECONDS", "-1", "AGAC_RATE_WINDOW_SECONDS must be a number > 0"),
    ],
)
def test_i29_17_a_bad_setting_in_the_environment_is_named(
    tmp_path: Path, variable: str, value: str, says: str
) -> None:
    root = _project(tmp_path)
    before = _files(root)
    ran = agac("run", "env", "--json", cwd=root, env={variable: value})
    assert ran.code == 2, ran
    (error,) = ran.json()["errors"]
    assert (error["code"], error["file"]) == ("invalid_provider_option", "environment")
    assert says in error["message"]
    assert "bug in agac" not in ran.out + ran.err and "ValueError" not in ran.out + ran.err
    assert _files(root) == before


def test_i29_17_the_environment_and_agac_yml_take_the_same_range(tmp_path: Path) -> None:
    root = _project(tmp_path, "providers:\n  mock:\n    fail_rate: 7\n")
    checked = agac("validate", "env", cwd=root)
    assert checked.code == 2 and "must be a number >= 0 and <= 1" in checked.err, checked
    ok = _project(tmp_path / "ok")
    assert agac("run", "env", cwd=ok, env={"AGAC_MOCK_FAIL_RATE": "0.0"}).code == 0


@pytest.mark.parametrize(
    "value",
    ["MEMORY", "memory?x=1", "garbage", "sqlite:///x.db?mode=ro", "mysql://db/x", "sqlite:"],
)
def test_i29_17_a_store_url_outside_the_forms_is_refused_and_creates_nothing(
    tmp_path: Path, value: str
) -> None:
    root = _project(tmp_path)
    before = _files(root)
    for args in (("run", "env"), ("status",), ("validate", "env")):
        result = agac(*args, cwd=root, env={"AGAC_STORE": value})
        assert result.code == 2, result
        assert "invalid_store" in result.err and "AGAC_STORE" in result.err, result
        assert "postgresql://USER@HOST:PORT/DB" in result.err  # the forms are listed
        assert "Warning" not in result.err
    assert _files(root) == before


def test_i29_17_a_store_in_agac_yml_outside_the_forms_is_located(tmp_path: Path) -> None:
    root = _project(tmp_path, "# the store\nstore: garbage\n")
    before = _files(root)
    result = agac("run", "env", "--json", cwd=root)
    assert result.code == 2, result
    (error,) = result.json()["errors"]
    assert (error["code"], error["file"], error["line"]) == ("invalid_store", "agac.yml", 2)
    assert _files(root) == before


def test_i29_17_status_says_which_store_it_read(tmp_path: Path) -> None:
    root = _project(tmp_path)
    empty = agac("status", cwd=root, env={"AGAC_STORE": "other.db"})
    assert empty.code != 0
    assert f"{root}/other.db" in empty.err and "AGAC_STORE" in empty.err, empty
    assert agac("run", "env", cwd=root).code == 0
    shown = agac("status", "env", "--json", cwd=root)
    assert shown.json()["store"] == {"url": f"{root}/.agac/agac.db", "source": "default"}
    text = agac("status", "env", cwd=root)
    assert f"store: {root}/.agac/agac.db (default)" in text.out, text
    named = _project(tmp_path / "named", "store: sqlite:///state/x.db\n")
    assert agac("run", "env", cwd=named).code == 0
    read = agac("status", "env", "--json", cwd=named).json()["store"]
    assert read == {"url": f"{named}/state/x.db", "source": "agac.yml"}
