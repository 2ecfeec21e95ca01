"""X2 (issue 29 item 10) at the validator: which ``$ref``s resolve, how project files are
bundled into one self-contained schema, and what the engine does with a stored schema
that still names a URL (an older agac admitted it): refused before anything is sent."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agac.config.schemarefs import unresolved_refs
from agac.engine.actions import SchemaValidator
from agac.errors import ConfigError


def _wf(schema: dict[str, Any]) -> str:
    return ("input: {path: data.jsonl}\nactions:\n  - name: a\n    model: mock/any\n"
            "    prompt: x\n    schema: " + json.dumps(schema) + "\n")


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [v for k, v in value.items() if k == "$ref"] + [
            r for v in value.values() for r in _refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    return []


@pytest.mark.parametrize("ref", [
    "http://127.0.0.1:9/s.json", "https://example.com/s.json#/$defs/x",
    "file:///etc/passwd", "ftp://example.com/s.json", "../outside.json",
    "urn:example:schema",
])
def test_i29_10_a_ref_outside_the_schema_and_the_project_is_refused(wf, ref: str) -> None:
    checked = wf.check(_wf({"type": "object", "properties": {"x": {"$ref": ref}}}))
    problem = checked.one("schema_ref_refused")
    assert problem.path.endswith("schema.properties.x.$ref"), problem
    assert ref in problem.message
    assert checked.workflow is None


def test_x2_a_symlink_out_of_the_project_is_refused(wf, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text('{"type": "string"}')
    os.symlink(outside, wf.root / "linked.json")
    checked = wf.check(_wf({"$ref": "linked.json"}))
    assert "not under the project" in checked.one("schema_ref_refused").message


@pytest.mark.parametrize(("files", "ref", "says"), [
    ({}, "missing.json", "cannot be read"),
    ({"s.json": "{not json"}, "s.json", "not JSON"),
    ({"s.json": '{"$defs": {}}'}, "s.json#/$defs/nothing", "does not resolve"),
    ({}, "#/$defs/nothing", "does not resolve"),
])
def test_x2_a_ref_that_names_nothing_is_unresolved(wf, files: dict[str, str], ref: str,
                                                   says: str) -> None:
    for name, text in files.items():
        (wf.root / name).write_text(text)
    checked = wf.check(_wf({"type": "object", "properties": {"x": {"$ref": ref}}}))
    assert says in checked.one("schema_ref_unresolved").message


def test_x2_a_fifo_is_not_read(wf) -> None:
    os.mkfifo(wf.root / "pipe.json")
    checked = wf.check(_wf({"$ref": "pipe.json"}))
    assert "not a regular file" in checked.one("schema_ref_unresolved").message


def test_x2_refs_within_the_schema_are_kept_as_written(wf) -> None:
    schema = {"$defs": {"s": {"enum": ["a"]}}, "type": "object",
              "properties": {"x": {"$ref": "#/$defs/s"},
                             "$ref": {"type": "string"},  # a property named $ref
                             "y": {"const": {"$ref": "http://not.a.ref/"}}}}
    checked = wf.check(_wf(schema))
    assert checked.workflow is not None, checked.problems
    assert checked.workflow.action("a").schema == schema


def test_x2_project_files_are_bundled_into_one_document(wf) -> None:
    (wf.root / "schemas").mkdir()
    (wf.root / "schemas" / "common.json").write_text(json.dumps({
        "$defs": {"label": {"type": "string", "enum": ["pos", "neg"]},
                  "pair": {"type": "array", "items": {"$ref": "#/$defs/label"}},
                  "score": {"$ref": "score.json"}}}))
    (wf.root / "schemas" / "score.json").write_text('{"type": "integer", "minimum": 0}')
    checked = wf.check(_wf({"type": "object", "properties": {
        "label": {"$ref": "schemas/common.json#/$defs/label"},
        "pair": {"$ref": "schemas/common.json#/$defs/pair"},
        "score": {"$ref": "schemas/common.json#/$defs/score"}}}))
    assert checked.workflow is not None, checked.problems
    schema = checked.workflow.action("a").schema
    assert all(ref.startswith("#/$defs/") for ref in _refs(schema)), _refs(schema)
    assert unresolved_refs(schema) == []
    validator = SchemaValidator(schema, "a")
    assert validator.is_valid({"label": "pos", "pair": ["neg"], "score": 3})
    assert not validator.is_valid({"label": "pos", "pair": ["maybe"], "score": 3})
    assert not validator.is_valid({"label": "pos", "pair": [], "score": -1})


def test_x2_a_bundle_may_not_use_ids(wf) -> None:
    (wf.root / "s.json").write_text('{"type": "string"}')
    checked = wf.check(_wf({"$id": "https://example.com/root.json",
                            "properties": {"x": {"$ref": "s.json"}}}))
    assert checked.one("schema_ref_refused")
    checked = wf.check(_wf({"$defs": {"a": {"$anchor": "here", "type": "string"}},
                            "properties": {"x": {"$ref": "s.json"}}}))
    assert "$id, anchors" in checked.one("schema_ref_refused").message


def test_i29_10_a_stored_schema_naming_a_url_is_refused_before_any_call() -> None:
    """The engine builds its validator before anything is sent; it retrieves nothing."""
    with pytest.raises(ConfigError) as caught:
        SchemaValidator({"properties": {"x": {"$ref": "http://127.0.0.1:9/s.json"}}}, "a")
    assert caught.value.problems[0].code == "schema_ref_refused"
    assert SchemaValidator({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}).is_valid("x")
