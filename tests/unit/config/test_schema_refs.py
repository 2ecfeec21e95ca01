"""X2 (issue 29 item 10) at the validator: a schema's ``$ref`` is resolved at validation,
within the schema or from JSON files under the project, and never fetched: a ref to a host
or a file elsewhere is refused with a located ``schema_ref_refused`` before anything is
sent; project files are bundled into one self-contained schema; and a validator agac
builds retrieves nothing, refusing even a schema handed to it directly (a run an older
agac admitted) before anything is sent."""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agac.config.schemarefs import unresolved_refs
from agac.engine.actions import SchemaValidator
from agac.errors import ConfigError

BASE = """
input: {path: data.jsonl}
actions:
"""


class _Counting(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        body = json.dumps({"type": "string"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_host() -> Iterator[str]:
    _Counting.hits = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/label.json"
    finally:
        server.shutdown()
        server.server_close()


def _action(schema: dict[str, Any]) -> str:
    return (
        BASE + f"  - name: a\n    model: mock/m\n    prompt: x\n    schema: {json.dumps(schema)}\n"
    )


def test_x2_a_ref_to_a_host_is_refused_at_validation_and_never_fetched(
    wf, schema_host: str
) -> None:
    checked = wf.check(_action({"type": "object", "properties": {"label": {"$ref": schema_host}}}))
    problem = checked.one("schema_ref_refused")
    assert (problem.file, problem.line) == ("wf.yml", checked.line_of("schema:"))
    assert schema_host in problem.message and "never fetches" in problem.message
    assert _Counting.hits == 0


def test_x2_a_ref_to_a_file_is_refused(wf) -> None:
    checked = wf.check(_action({"$ref": "file:///etc/passwd"}))
    assert "file:///etc/passwd" in checked.one("schema_ref_refused").message
    checked = wf.check(_action({"$ref": "other.json#/definitions/x"}))
    assert checked.one("schema_ref_refused").line == checked.line_of("schema:")


def test_x2_refs_within_the_schema_validate(wf) -> None:
    schema = {
        "type": "object",
        "$defs": {"label": {"enum": ["pos", "neg"]}},
        "properties": {
            "a": {"$ref": "#/$defs/label"},
            "b": {"$ref": "#lab"},
            "c": {"$id": "urn:x:c", "type": "string"},
            "d": {"$ref": "urn:x:c"},
        },
        "required": ["a"],
    }
    schema["$defs"]["anchored"] = {"$anchor": "lab", "type": "string"}
    checked = wf.check(_action(schema))
    assert [p.code for p in checked.problems] == []


def test_x2_a_local_ref_that_names_nothing_is_invalid_schema(wf) -> None:
    checked = wf.check(_action({"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}))
    assert "#/$defs/nope" in checked.one("invalid_schema").message


def test_x2_a_validator_never_fetches_even_when_handed_a_remote_ref(schema_host: str) -> None:
    """The engine builds its validator before anything is sent: a stored schema that
    names a URL is refused there; one that does not resolves with nothing retrieved."""
    with pytest.raises(ConfigError) as caught:
        SchemaValidator({"type": "object", "properties": {"label": {"$ref": schema_host}}}, "a")
    assert caught.value.problems[0].code == "schema_ref_refused"
    assert _Counting.hits == 0
    assert SchemaValidator({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}).is_valid("x")


def _wf(schema: dict[str, Any]) -> str:
    return (
        "input: {path: data.jsonl}\nactions:\n  - name: a\n    model: mock/any\n"
        "    prompt: x\n    schema: " + json.dumps(schema) + "\n"
    )


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [v for k, v in value.items() if k == "$ref"] + [
            r for v in value.values() for r in _refs(v)
        ]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    return []


@pytest.mark.parametrize(
    "ref",
    [
        "http://127.0.0.1:9/s.json",
        "https://example.com/s.json#/$defs/x",
        "file:///etc/passwd",
        "ftp://example.com/s.json",
        "../outside.json",
        "urn:example:schema",
    ],
)
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


@pytest.mark.parametrize(
    ("files", "ref", "code", "says"),
    [
        ({}, "missing.json", "schema_ref_refused", "cannot be read"),
        ({"s.json": "{not json"}, "s.json", "schema_ref_refused", "not JSON"),
        ({"s.json": '{"$defs": {}}'}, "s.json#/$defs/nothing", "invalid_schema", "names nothing"),
        ({}, "#/$defs/nothing", "invalid_schema", "names nothing"),
    ],
)
def test_x2_a_ref_that_names_nothing_is_located(
    wf, files: dict[str, str], ref: str, code: str, says: str
) -> None:
    for name, text in files.items():
        (wf.root / name).write_text(text)
    checked = wf.check(_wf({"type": "object", "properties": {"x": {"$ref": ref}}}))
    problem = checked.one(code)
    assert says in problem.message and problem.path.endswith("properties.x.$ref")


def test_x2_a_fifo_is_not_read(wf) -> None:
    os.mkfifo(wf.root / "pipe.json")
    checked = wf.check(_wf({"$ref": "pipe.json"}))
    assert "not a regular file" in checked.one("schema_ref_refused").message


def test_x2_refs_within_the_schema_are_kept_as_written(wf) -> None:
    schema = {
        "$defs": {"s": {"enum": ["a"]}},
        "type": "object",
        "properties": {
            "x": {"$ref": "#/$defs/s"},
            "$ref": {"type": "string"},  # a property named $ref
            "y": {"const": {"$ref": "http://not.a.ref/"}},
        },
    }
    checked = wf.check(_wf(schema))
    assert checked.workflow is not None, checked.problems
    assert checked.workflow.action("a").schema == schema


def test_x2_project_files_are_bundled_into_one_document(wf) -> None:
    (wf.root / "schemas").mkdir()
    (wf.root / "schemas" / "common.json").write_text(
        json.dumps(
            {
                "$defs": {
                    "label": {"type": "string", "enum": ["pos", "neg"]},
                    "pair": {"type": "array", "items": {"$ref": "#/$defs/label"}},
                    "score": {"$ref": "score.json"},
                }
            }
        )
    )
    (wf.root / "schemas" / "score.json").write_text('{"type": "integer", "minimum": 0}')
    checked = wf.check(
        _wf(
            {
                "type": "object",
                "properties": {
                    "label": {"$ref": "schemas/common.json#/$defs/label"},
                    "pair": {"$ref": "schemas/common.json#/$defs/pair"},
                    "score": {"$ref": "schemas/common.json#/$defs/score"},
                },
            }
        )
    )
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
    checked = wf.check(
        _wf({"$id": "https://example.com/root.json", "properties": {"x": {"$ref": "s.json"}}})
    )
    assert checked.one("schema_ref_refused")
    checked = wf.check(
        _wf(
            {
                "$defs": {"a": {"$anchor": "here", "type": "string"}},
                "properties": {"x": {"$ref": "s.json"}},
            }
        )
    )
    assert "$id, anchors" in checked.one("schema_ref_refused").message
