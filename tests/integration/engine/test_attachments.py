"""Issue 22: documents and images sent with a prompt — the workflow's ``attachments:``,
what each bad file does to its unit (a reason code on that unit only), and the
fingerprint that covers each file's bytes (reuse across runs, a changed file re-asked)."""

from __future__ import annotations

import base64
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agac import api
from agac.providers.mock import MockProvider
from agac.samplefiles import gif_bytes, jpeg_bytes, pdf_bytes, png_bytes, webp_bytes
from agac.testing import write_project

WF = """
name: wf
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 4, retry: {max_attempts: 1}}
actions:
  - name: read
    prompt: "Extract the fields of record {{ source.id }}"
    attachments: ["{{ source.file }}"]
    schema: {type: object, properties: {total: {type: number}}, required: [total]}
"""


def _project(root: Path, rows: list[dict[str, Any]], workflow: str = WF) -> Path:
    return write_project(root, workflow, data={"data/a.jsonl": rows})


def _outcomes(root: Path, action: str = "read") -> dict[str, tuple[str, str | None, str | None]]:
    return {
        r["key"]: (r["status"], r["reason"], r["detail"])
        for r in api.export_rows("wf", action, root)
    }


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    (root / "files").mkdir()
    return root


def test_i22_1_every_supported_kind_is_judged_by_its_bytes(root: Path) -> None:
    files = {
        "a.png": png_bytes(),
        "b.jpg": jpeg_bytes(),
        "c.gif": gif_bytes(),
        "d.webp": webp_bytes(),
        "e.pdf": pdf_bytes(2),
        "lying.pdf": png_bytes(3, 3),
    }  # a PNG with a PDF's extension: sent as a PNG
    for name, data in files.items():
        (root / "files" / name).write_bytes(data)
    _project(root, [{"id": n, "file": f"files/{n}"} for n in files])
    result = api.run("wf", root)
    assert result.summary["actions"]["read"]["answered"] == len(files), _outcomes(root)
    session = api.record_session("lying.pdf", root)
    text = str(session)
    assert "image/png" in text and "application/pdf" not in text.split("lying.pdf", 1)[1][:300]


def test_i22_1_bad_input_each_fails_its_own_unit_with_a_reason(root: Path, tmp_path: Path) -> None:
    f = root / "files"
    (f / "good.png").write_bytes(png_bytes())
    (f / "empty.png").write_bytes(b"")
    (f / "text.png").write_bytes(b"hello, not an image")
    (f / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << >> endobj\n")  # no pages, no %%EOF
    (f / "folder").mkdir()
    (f / "loop").symlink_to(f / "loop")
    (f / "secret.png").write_bytes(png_bytes())
    os.chmod(f / "secret.png", 0)
    outside = tmp_path / "outside.png"
    outside.write_bytes(png_bytes())
    rows = [
        {"id": "good", "file": "files/good.png"},
        {"id": "missing", "file": "files/nope.png"},
        {"id": "empty", "file": "files/empty.png"},
        {"id": "text", "file": "files/text.png"},
        {"id": "broken", "file": "files/broken.pdf"},
        {"id": "folder", "file": "files/folder"},
        {"id": "loop", "file": "files/loop"},
        {"id": "escape", "file": "../outside.png"},
        {"id": "absolute", "file": str(outside)},  # outside the project: refused
        {"id": "inside", "file": str(f / "good.png")},  # absolute, inside the project
        {"id": "notb64", "file": "data:image/png;base64,@@@not base64@@@"},
        {"id": "plain", "file": "data:image/png,rawtext"},
        {"id": "url", "file": "https://example.com/a.png"},
    ]
    if os.geteuid() != 0:  # root reads any file
        rows.append({"id": "unreadable", "file": "files/secret.png"})
    _project(root, rows)
    result = api.run("wf", root)
    got = _outcomes(root)
    want = {
        "good": ("answered", None),
        "absolute": ("failed", "attachment_outside_project"),
        "inside": ("answered", None),
        "missing": ("failed", "attachment_not_found"),
        "empty": ("failed", "unsupported_attachment"),
        "text": ("failed", "unsupported_attachment"),
        "broken": ("failed", "attachment_corrupt"),
        "folder": ("failed", "attachment_unreadable"),
        "loop": ("failed", "attachment_unreadable"),
        "escape": ("failed", "attachment_outside_project"),
        "notb64": ("failed", "invalid_data_url"),
        "plain": ("failed", "invalid_data_url"),
        "url": ("failed", "unsupported_attachment"),
    }
    if "unreadable" in got:
        want["unreadable"] = ("failed", "attachment_unreadable")
    assert {k: v[:2] for k, v in got.items()} == want
    assert "nope.png" in (got["missing"][2] or "")
    assert result.summary["actions"]["read"]["reasons"]["attachment_not_found"] == 1
    assert result.summary["state"] == "partial"


def test_i22_1_a_data_url_is_attached_and_kept_by_hash_not_in_the_store(root: Path) -> None:
    data = png_bytes(5, 5, seed=7)
    url = "data:image/png;base64," + base64.b64encode(data).decode()
    _project(root, [{"id": "d", "file": url}])
    result = api.run("wf", root)
    assert result.summary["actions"]["read"]["answered"] == 1
    kept = list((root / ".agac" / "attachments").rglob("*"))
    assert any(p.is_file() and p.read_bytes() == data for p in kept)


def test_i22_1_a_template_may_give_a_list_and_position_after(root: Path) -> None:
    for i in range(3):
        (root / "files" / f"p{i}.png").write_bytes(png_bytes(seed=i))
    wf = WF.replace(
        'attachments: ["{{ source.file }}"]',
        'attachments: ["{{ source.pages }}", "files/p0.png"]\n    attachments_position: after',
    )
    _project(root, [{"id": "r", "pages": ["files/p1.png", "files/p2.png"]}], wf)
    api.run("wf", root)
    session = api.record_session("r", root)
    request = _request_of(session)
    user = request["messages"][-1]
    assert user["position"] == "after"
    assert [a["name"] for a in user["attachments"]] == ["p1.png", "p2.png", "p0.png"]


def _request_of(session: Any) -> dict[str, Any]:
    text = session if isinstance(session, dict) else session.to_dict()
    found: list[dict[str, Any]] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if "messages" in v and "model" in v:
                found.append(v)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(text)
    assert found, text
    return found[0]


# -- item 2: fingerprints, reuse, the store, the snapshot ------------------------------------


def _summary(result: Any) -> dict[str, Any]:
    return result.summary["actions"]["read"]


def test_i22_2_the_same_bytes_are_asked_once_across_runs(root: Path) -> None:
    (root / "files" / "a.png").write_bytes(png_bytes(seed=1))
    (root / "files" / "copy.png").write_bytes(png_bytes(seed=1))  # same bytes, other path
    _project(root, [{"id": "a", "file": "files/a.png"}])
    first = api.run("wf", root)
    assert _summary(first)["calls"] == 1
    again = api.run("wf", root)
    assert _summary(again)["calls"] == 0 and _summary(again)["reused"] == 1
    _project(root, [{"id": "a", "file": "files/copy.png"}])
    moved = api.run("wf", root)
    assert _summary(moved)["calls"] == 0, "the fingerprint names the bytes, not the path"


def test_i22_2_a_changed_file_is_a_new_request(root: Path) -> None:
    target = root / "files" / "a.png"
    target.write_bytes(png_bytes(seed=1))
    _project(root, [{"id": "a", "file": "files/a.png"}])
    api.run("wf", root)
    target.write_bytes(png_bytes(seed=2))
    result = api.run("wf", root)
    assert _summary(result)["calls"] == 1 and _summary(result)["answered"] == 1


def test_i22_2_the_store_holds_hashes_never_bytes(root: Path) -> None:
    from agac.samplefiles import png_of_size

    data = png_of_size(30_000, seed=3)
    (root / "files" / "big.png").write_bytes(data)
    _project(root, [{"id": "a", "file": "files/big.png"}])
    api.run("wf", root)
    stored = b"".join(p.read_bytes() for p in (root / ".agac").glob("agac.db*"))
    probe = data[2000:2064]
    assert probe not in stored
    assert base64.b64encode(data[3000:3060]) not in stored
    import hashlib

    assert hashlib.sha256(data).hexdigest().encode() in stored


def test_i22_2_the_snapshot_records_each_attachments_hash_and_size(root: Path) -> None:
    from agac.store.repository import Store

    data = png_bytes(seed=9)
    (root / "files" / "a.png").write_bytes(data)
    _project(root, [{"id": "a", "file": "files/a.png"}, {"id": "b", "file": "files/none.png"}])
    result = api.run("wf", root)
    store = Store(f"sqlite:///{root}/.agac/agac.db")
    try:
        run = store.get_run(result.run_id)
        got = store.snapshot_attachments(run.snapshot_id)
    finally:
        store.close()
    import hashlib

    assert got == {str(root / "files" / "a.png"): (hashlib.sha256(data).hexdigest(), len(data))}


class ChangingProvider(MockProvider):
    """The mock, except that it rewrites (or removes) the file of a record whose prompt
    says so right before it sends: the file changed between the request and its sending."""

    spec = dataclasses.replace(MockProvider.spec, name="changing")

    async def complete(self, request: Any) -> Any:
        text = request.messages[-1].content
        for att in request.attachments:
            if "change-me" in text:
                Path(att.path).write_bytes(png_bytes(seed=99))
            if "remove-me" in text:
                Path(att.path).unlink()
        return await super().complete(request)


@pytest.fixture
def changing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from agac.providers import registry

    monkeypatch.setitem(registry._BUILTIN, "changing", "test_attachments:ChangingProvider")
    registry._targets.cache_clear()
    yield
    registry._targets.cache_clear()


def test_i22_2_a_file_changed_or_gone_before_sending_fails_only_its_unit(
    root: Path, changing: None
) -> None:
    for name in ("ok", "change-me", "remove-me"):
        (root / "files" / f"{name}.png").write_bytes(png_bytes(seed=len(name)))
    wf = WF.replace("mock/m1", "changing/m1")
    _project(
        root, [{"id": n, "file": f"files/{n}.png"} for n in ("ok", "change-me", "remove-me")], wf
    )
    result = api.run("wf", root)
    got = _outcomes(root)
    assert got["ok"][:2] == ("answered", None)
    assert got["change-me"][:2] == ("failed", "attachment_changed")
    assert got["remove-me"][:2] == ("failed", "attachment_not_found")
    assert _summary(result)["calls"] == 1, "nothing was sent for the two that changed"


def test_i22_2_a_file_changed_since_admission_fails_attachment_changed(root: Path) -> None:
    from agac.config import find_project, load_workflow
    from agac.engine.actions import build_runtime
    from agac.engine.requests import build_request
    from agac.errors import AttachmentError

    target = root / "files" / "a.png"
    target.write_bytes(png_bytes(seed=1))
    _project(root, [{"id": "a", "file": "files/a.png"}])
    action = load_workflow("wf", find_project(root)).action("read")
    rt = build_runtime(action, None, root, admitted={str(target): ("0" * 64, 5)})
    with pytest.raises(AttachmentError) as caught:
        build_request(rt, {"source": {"id": "a", "file": "files/a.png"}})
    assert caught.value.reason == "attachment_changed"
