"""X2 (issue 29, item 10): a schema's ``$ref`` is resolved within the schema, at
validation, and never fetched: a ref to a host or a file is refused with a located
``schema_ref_refused`` before anything is sent, and a validator agac builds cannot
retrieve one even when handed such a schema directly."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agac.engine.actions import SchemaValidator

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
    return BASE + f"  - name: a\n    model: mock/m\n    prompt: x\n    schema: {json.dumps(schema)}\n"


def test_x2_a_ref_to_a_host_is_refused_at_validation_and_never_fetched(wf, schema_host: str) -> None:
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
    schema = {"type": "object", "$defs": {"label": {"enum": ["pos", "neg"]}},
              "properties": {"a": {"$ref": "#/$defs/label"}, "b": {"$ref": "#lab"},
                             "c": {"$id": "urn:x:c", "type": "string"}, "d": {"$ref": "urn:x:c"}},
              "required": ["a"]}
    schema["$defs"]["anchored"] = {"$anchor": "lab", "type": "string"}
    checked = wf.check(_action(schema))
    assert [p.code for p in checked.problems] == []


def test_x2_a_local_ref_that_names_nothing_is_invalid_schema(wf) -> None:
    checked = wf.check(_action({"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}))
    assert "#/$defs/nope" in checked.one("invalid_schema").message


def test_x2_a_validator_never_fetches_even_when_handed_a_remote_ref(schema_host: str) -> None:
    from referencing.exceptions import Unresolvable

    validator = SchemaValidator({"type": "object", "properties": {"label": {"$ref": schema_host}}})
    with pytest.raises(Unresolvable):
        validator.is_valid({"label": "pos"})
    assert _Counting.hits == 0
