"""X2 (issue 29 item 10): a schema's ``$ref``s are resolved once, at validation, within
the schema or from JSON files under the project; anything else is refused there,
located, before anything is sent. Through the real ``agac`` process: a local HTTP server
that counts its hits sees none, and ``file:///etc/passwd`` is refused, not read.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from cli_support import agac

from agac.testing import write_project

WORKFLOW = """\
name: refs
input: {path: data/a.jsonl, id_field: id}
actions:
  - name: label
    model: mock/any
    prompt: "Label {{ source.text }}"
    schema:
      type: object
      properties:
        sentiment:
          $ref: "REF"
      required: [sentiment]
"""


class _Counting(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        body = json.dumps({"enum": ["pos", "neg"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    hits: ClassVar[list[str]] = []
    handler = type("Handler", (_Counting,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def _project(root: Path, ref: str, files: dict[str, str] | None = None) -> Path:
    return write_project(
        root,
        WORKFLOW.replace("REF", ref),
        data={"data/a.jsonl": [{"id": 1, "text": "good"}]},
        files=files,
    )


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_x2_an_http_ref_is_refused_at_validation_and_never_fetched(
    tmp_path: Path, schema_server: tuple[str, list[str]]
) -> None:
    url, hits = schema_server
    wf = _project(tmp_path, f"{url}/sentiment.json")
    checked = agac("validate", "refs", "--json", cwd=tmp_path)
    assert checked.code == 2, checked
    (error,) = checked.json()["errors"]
    assert error["code"] == "schema_ref_refused"
    assert (error["file"], error["line"]) == ("workflows/wf.yml", _line_of(wf, "$ref"))
    assert "never fetches" in error["message"]
    ran = agac("run", "refs", "--json", cwd=tmp_path)
    assert ran.code == 2, ran
    assert "schema_ref_refused" in ran.out + ran.err
    assert hits == []


def test_i29_10_an_http_ref_reaches_no_host(
    tmp_path: Path, schema_server: tuple[str, list[str]]
) -> None:
    url, hits = schema_server
    _project(tmp_path, f"{url}/sentiment.json")
    for args in (("validate", "refs"), ("plan", "refs"), ("run", "refs")):
        result = agac(*args, cwd=tmp_path)
        assert result.code == 2, result
    assert hits == []


def test_i29_10_file_etc_passwd_is_refused_before_anything_is_paid(tmp_path: Path) -> None:
    _project(tmp_path, "file:///etc/passwd")
    checked = agac("validate", "refs", "--json", cwd=tmp_path)
    assert checked.code == 2, checked
    (error,) = checked.json()["errors"]
    assert error["code"] == "schema_ref_refused"
    assert "not under the project" in error["message"]
    assert "root:" not in checked.out  # nothing of the file was read into the message


def test_x2_a_ref_to_a_project_file_is_bundled_and_answered(tmp_path: Path) -> None:
    files = {
        "schemas/common.json": json.dumps(
            {"$defs": {"sentiment": {"type": "string", "enum": ["pos", "neg"]}}}
        )
    }
    _project(tmp_path, "schemas/common.json#/$defs/sentiment", files)
    ran = agac("run", "refs", "--json", cwd=tmp_path)
    assert ran.code == 0, ran
    assert ran.json()["actions"]["label"]["answered"] == 1
    # The file is part of the request: a changed file is a new request, asked again.
    (tmp_path / "schemas/common.json").write_text(
        json.dumps({"$defs": {"sentiment": {"type": "string", "enum": ["good", "bad"]}}})
    )
    again = agac("run", "refs", "--new", "--json", cwd=tmp_path)
    assert again.code == 0, again
    assert again.json()["actions"]["label"]["calls"] == 1
    shown = agac("export", "refs", "--action", "label", cwd=tmp_path)
    assert shown.code == 0, shown
    assert '"good"' in shown.out or '"bad"' in shown.out
