"""Record keys that are URLs or paths never collide with fan-out item keys (issue 12
item 7): item keys escape their record key (``%`` -> ``%25``, ``/`` -> ``%2F``), in the
store, in status and export, and in what a person types."""

from __future__ import annotations

import csv
from pathlib import Path

from cli_support import agac

from agac.testing import write_project

WF = """\
name: keys
input: {path: data/a.jsonl, id_field: id}
defaults: {model: mock/m}
actions:
  - name: draft
    prompt: "Draft {{ source.text }} ({{ version }})"
    fan_out: {versions: 2}
  - name: pick
    kind: join
    dependencies: [draft]
    join: draft
"""
# "a/0" is a record, and would be item 0 of record "a" if keys were not escaped.
ROWS = [
    {"id": "a", "text": "one"},
    {"id": "a/0", "text": "two"},
    {"id": "http://example.com/p?q=1", "text": "three"},
    {"id": "50%", "text": "four"},
]


def _project(root: Path) -> Path:
    write_project(root, WF, data={"data/a.jsonl": ROWS})
    return root


def test_record_keys_and_item_keys_cannot_collide(tmp_path: Path) -> None:
    root = _project(tmp_path)

    doc = agac("run", "keys", "--json", cwd=root).json()

    assert doc["state"] == "succeeded", doc
    assert doc["actions"]["draft"]["records"] == 8 and doc["actions"]["draft"]["answered"] == 8
    assert doc["actions"]["pick"]["answered"] == 4
    drafts = [r["key"] for r in agac("export", "keys", "--action", "draft", cwd=root).json_lines()]
    assert drafts == [
        "a/0",
        "a/1",
        "a%2F0/0",
        "a%2F0/1",
        "http:%2F%2Fexample.com%2Fp?q=1/0",
        "http:%2F%2Fexample.com%2Fp?q=1/1",
        "50%25/0",
        "50%25/1",
    ]
    picks = [r["key"] for r in agac("export", "keys", "--action", "pick", cwd=root).json_lines()]
    assert picks == [r["id"] for r in ROWS]  # a record's row: its key as in the input


def test_i35_15_a_record_key_reads_the_same_in_the_per_action_and_the_wide_csv(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    assert agac("run", "keys", cwd=root).code == 0
    exports = {}
    for args in (("--action", "pick"), ("--all-actions",)):
        out = root / "out.csv"
        assert agac("export", "keys", *args, "--out", str(out), cwd=root).code == 0
        with out.open(encoding="utf-8", newline="") as handle:
            exports[args[0]] = [row["key"] for row in csv.DictReader(handle)]
    assert exports["--action"] == exports["--all-actions"] == [r["id"] for r in ROWS]


def test_records_show_takes_a_record_key_or_an_item_key(tmp_path: Path) -> None:
    root = _project(tmp_path)
    agac("run", "keys", cwd=root)

    record = agac("records", "show", "a/0", "--json", cwd=root).json()  # the record "a/0"
    assert record["record"]["key"] == "a/0" and record["record"]["payload"]["text"] == "two"
    assert [i["key"] for i in record["items"]] == ["a%2F0/0", "a%2F0/1"]

    item = agac("records", "show", "a/0", "--workflow", "keys", "--json", cwd=root)
    assert item.json()["record"]["key"] == "a/0"
    of_a = agac("records", "show", "a", "--json", cwd=root).json()
    assert [i["key"] for i in of_a["items"]] == ["a/0", "a/1"]  # not the record "a/0"

    shown = agac("records", "show", "a%2F0/1", "--json", cwd=root).json()
    assert shown["key"] == "a%2F0/1" and shown["record"]["key"] == "a/0"
    url = agac("records", "show", "http://example.com/p?q=1", "--json", cwd=root).json()
    assert url["record"]["payload"]["text"] == "three"


def test_retry_record_takes_the_record_key_as_in_the_input(tmp_path: Path) -> None:
    root = _project(tmp_path)
    wf = root / "workflows" / "wf.yml"
    wf.write_text(wf.read_text().replace('"Draft {{ source.text }}', '"Draft {{ source.missing }}'))
    failed = agac("run", "keys", "--json", cwd=root).json()
    assert failed["actions"]["draft"]["reasons"] == {"render_error": 8}

    plan = agac("retry", "keys", "--record", "a/0", "--dry-run", "--json", cwd=root).json()

    assert sorted(u["key"] for u in plan["units"]) == ["a%2F0/0", "a%2F0/1"]


def test_run_admitted_before_escaping_with_such_keys_is_not_continued(tmp_path: Path) -> None:
    """Compatibility rule: an open run whose options do not say its unit keys are escaped
    (an older agac admitted it) over records whose keys hold '/' or '%' is refused with
    the command that works; a new run reuses every answer."""
    import json
    import sqlite3

    root = _project(tmp_path)
    crashed = agac("run", "keys", cwd=root, env={"AGAC_CRASH_AT": "after_checkpoint:1"})
    assert crashed.code == -9, crashed
    with sqlite3.connect(root / ".agac" / "agac.db") as db:
        [(run_id, options)] = db.execute("SELECT id, options FROM runs").fetchall()
        opts = json.loads(options)
        assert opts.pop("unit_keys") == "escaped"
        db.execute("UPDATE runs SET options = ? WHERE id = ?", (json.dumps(opts), run_id))

    refused = agac("run", "keys", cwd=root)

    assert refused.code == 2, refused
    assert "admitted by an older agac" in refused.err and "agac run keys --new" in refused.err
    done = agac("run", "keys", "--new", "--json", cwd=root)
    assert done.code == 0, done
    assert done.json()["actions"]["pick"]["answered"] == 4
