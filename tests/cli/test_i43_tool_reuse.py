"""Issue 43 item 1 (The newcomer's path): a tool's stored result is reused only when
everything it could read is the same — its record (unless ``reuse: by_inputs``), its
inputs, and the code of its function. The bundled ``review_triage_parquet`` once exported
another record's key from ``route``, and an edited tool kept its old results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli_support import agac


def _route_rows(root: Path, workflow: str) -> dict[str, Any]:
    exported = agac("export", workflow, "--action", "route", "--format", "jsonl", cwd=root)
    assert exported.code == 0, exported
    return {row["key"]: row["output"] for row in exported.json_lines()}


def _quickstart(tmp_path: Path) -> Path:
    assert agac("init", "proj", "--example", "quickstart", cwd=tmp_path).code == 0
    return tmp_path / "proj"


def test_i43_1_the_parquet_example_routes_each_review_under_its_own_key(tmp_path: Path) -> None:
    root = _quickstart(tmp_path)
    done = agac("run", "review_triage_parquet", "--json", cwd=root)
    assert done.code == 0, done
    route = done.json()["actions"]["route"]
    # Equal classifications (r0005 and r0014 are both neg/price) are not one call's result.
    assert route["tool_calls"] == 24 and route["reused"] == 0, route
    rows = _route_rows(root, "review_triage_parquet")
    assert len(rows) == 24
    assert all(row["review"] == key for key, row in rows.items()), rows
    assert rows["r0014"]["review"] == "r0014"
    again = agac("run", "review_triage_parquet", "--json", cwd=root)
    assert again.code == 0, again
    # The next run reuses each record's own stored result: nothing is called again.
    assert again.json()["actions"]["route"]["tool_calls"] == 0, again


def test_i43_1_a_tool_whose_code_is_edited_is_called_again(tmp_path: Path) -> None:
    root = _quickstart(tmp_path)
    assert agac("run", "review_triage", cwd=root).code == 0
    before = _route_rows(root, "review_triage")
    assert {row["queue"] for row in before.values()} >= {"support", "archive"}
    tools = root / "tools" / "triage.py"
    tools.write_text(tools.read_text().replace('"archive"', '"shelf"'), encoding="utf-8")
    again = agac("run", "review_triage", "--json", cwd=root)
    assert again.code == 0, again
    assert again.json()["actions"]["route"]["tool_calls"] == 24, again
    after = _route_rows(root, "review_triage")
    assert "archive" not in {row["queue"] for row in after.values()}
    assert {k for k, row in after.items() if row["queue"] == "shelf"} == {
        k for k, row in before.items() if row["queue"] == "archive"
    }


def test_i43_1_an_edited_helper_in_the_tools_module_counts_as_an_edit(tmp_path: Path) -> None:
    """What is hashed is the whole file defining the function, its helpers included."""
    root = _quickstart(tmp_path)
    tools = root / "tools" / "triage.py"
    text = tools.read_text().replace(
        'return {"queue": queue, "review": ctx.record_key}',
        'return {"queue": _name(queue), "review": ctx.record_key}',
    )
    tools.write_text(text + "\n\ndef _name(queue):\n    return queue\n", encoding="utf-8")
    assert agac("run", "review_triage", cwd=root).code == 0
    tools.write_text(
        tools.read_text().replace("return queue\n", "return queue.upper()\n"), encoding="utf-8"
    )
    again = agac("run", "review_triage", "--json", cwd=root)
    assert again.json()["actions"]["route"]["tool_calls"] == 24, again
    assert {row["queue"] for row in _route_rows(root, "review_triage").values()} <= {
        "SUPPORT",
        "ARCHIVE",
        "LOGISTICS",
    }


_BY_INPUTS = """\
name: lookup
input: {path: data/reviews/, id_field: review_id}
defaults: {model: mock/triage-small}
actions:
  - name: classify
    prompt: "Label: {{ source.text }}"
    schema:
      type: object
      properties: {sentiment: {enum: [pos, neg, neutral]}, topic: {type: string}}
      required: [sentiment, topic]
  - name: route
    kind: tool
    dependencies: [classify]
    context: {observe: [classify.sentiment]}
    function: tools.pure:route
    reuse: by_inputs
"""

_PURE = """\
from pathlib import Path


def route(inputs, ctx):
    with Path(__file__).with_name("calls.txt").open("a") as calls:
        calls.write(ctx.record_key + "\\n")
    return {"queue": "support" if inputs["classify"]["sentiment"] == "neg" else "archive"}
"""


def test_i43_1_reuse_by_inputs_lets_any_record_take_a_pure_tools_result(
    tmp_path: Path,
) -> None:
    """``reuse: by_inputs`` drops the unit from the key (workflow, action, record): a second
    workflow with the same tool and inputs calls nothing; without it, every unit calls."""
    root = _quickstart(tmp_path)
    (root / "tools" / "pure.py").write_text(_PURE, encoding="utf-8")
    for name, text in (
        ("lookup", _BY_INPUTS),
        ("lookup_again", _BY_INPUTS.replace("name: lookup", "name: lookup_again")),
        (
            "lookup_own",
            _BY_INPUTS.replace("name: lookup", "name: lookup_own").replace(
                "    reuse: by_inputs\n", ""
            ),
        ),
    ):
        (root / "workflows" / f"{name}.yml").write_text(text, encoding="utf-8")
    checked = agac("validate", "lookup", cwd=root)
    assert checked.code == 0, checked
    done = agac("run", "lookup", "--json", cwd=root)
    assert done.code == 0, done
    assert done.json()["actions"]["route"]["answered"] == 24
    calls = root / "tools" / "calls.txt"
    first = calls.read_text().split()
    assert 1 <= len(first) <= 24
    shared = agac("run", "lookup_again", "--json", cwd=root)
    assert shared.code == 0, shared
    assert shared.json()["actions"]["route"]["tool_calls"] == 0, shared
    assert calls.read_text().split() == first
    assert _route_rows(root, "lookup_again") == _route_rows(root, "lookup")
    own = agac("run", "lookup_own", "--json", cwd=root)
    assert own.json()["actions"]["route"]["tool_calls"] == 24, own


def test_i43_1_reuse_is_checked_at_validate(tmp_path: Path) -> None:
    root = _quickstart(tmp_path)
    (root / "workflows" / "lookup.yml").write_text(
        _BY_INPUTS.replace("reuse: by_inputs", "reuse: by_input"), encoding="utf-8"
    )
    (root / "tools" / "pure.py").write_text(_PURE, encoding="utf-8")
    checked = agac("validate", "lookup", cwd=root)
    assert checked.code != 0
    assert "by_inputs" in checked.out + checked.err and "lookup.yml" in checked.out + checked.err
