"""Issue 35 (Hardening, third pass), items 1 and 2, through a real run: an attachment path
from a record never leaves the project (absolute, ``../``, a symbolic link out of it)
unless the action lists the folder in ``attachment_folders``; a named pipe, a link to
``/dev/zero`` and a file over the limit (sparse: no disk used) each fail their own unit
with their own reason, nothing of them read, and every other record is answered. The
reason shows in the summary, the export and the record's session."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from agac import api
from agac.media import MAX_FILE_BYTES
from agac.samplefiles import png_bytes
from agac.testing import write_project

WF = """
name: wf
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 4, retry: {max_attempts: 1}}
actions:
  - name: read
    prompt: "Describe record {{ source.id }}"
    attachments: ["{{ source.file }}"]
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    (root / "files").mkdir(parents=True)
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A folder out of the project holding ``scans/secret.png`` and ``other/private.png``."""
    out = tmp_path / "elsewhere"
    for name in ("scans", "other"):
        (out / name).mkdir(parents=True)
    (out / "scans" / "secret.png").write_bytes(png_bytes(seed=5))
    (out / "other" / "private.png").write_bytes(png_bytes(seed=6))
    return out


def _outcomes(root: Path) -> dict[str, tuple[str, str | None]]:
    return {r["key"]: (r["status"], r["reason"]) for r in api.export_rows("wf", "read", root)}


def _run(root: Path) -> Any:
    """The run, in a thread: a read that blocks (a named pipe) fails the test instead of
    hanging it (the wait is a guard only; the run needs no time)."""
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(api.run("wf", root)), daemon=True)
    worker.start()
    worker.join(120)
    assert got, "the run hung on a file it should not read"
    return got[0]


def test_i35_1_a_path_from_data_never_leaves_the_project(root: Path, elsewhere: Path) -> None:
    f = root / "files"
    (f / "good.png").write_bytes(png_bytes())
    (f / "out.png").symlink_to(elsewhere / "scans" / "secret.png")
    (f / "in.png").symlink_to(f / "good.png")
    (root / "door").symlink_to(elsewhere)
    rows = [
        {"id": "good", "file": "files/good.png"},
        {"id": "absolute-in", "file": str(f / "good.png")},
        {"id": "link-in", "file": "files/in.png"},
        {"id": "absolute-out", "file": str(elsewhere / "scans" / "secret.png")},
        {"id": "link-out", "file": "files/out.png"},
        {"id": "folder-link-out", "file": "door/scans/secret.png"},
        {"id": "dotdot", "file": "../elsewhere/scans/secret.png"},
        {"id": "etc", "file": "/etc/hostname"},
    ]
    write_project(root, WF, data={"data/a.jsonl": rows})
    result = _run(root)
    refused = {"absolute-out", "link-out", "folder-link-out", "dotdot", "etc"}
    assert _outcomes(root) == {
        r["id"]: ("failed", "attachment_outside_project")
        if r["id"] in refused
        else ("answered", None)
        for r in rows
    }
    summary = result.summary["actions"]["read"]
    assert summary["answered"] == 3 and summary["reasons"] == {"attachment_outside_project": 5}
    detail = next(
        r["detail"] for r in api.export_rows("wf", "read", root) if r["key"] == "link-out"
    )
    assert "files/out.png" in detail and "secret.png" in detail  # where it leads
    session = str(api.record_session("link-out", root))
    assert "attachment_outside_project" in session
    status = str(api.status("wf", root))
    assert "attachment_outside_project" in status


def test_i35_1_attachment_folders_let_in_exactly_the_folders_listed(
    root: Path, elsewhere: Path
) -> None:
    f = root / "files"
    (f / "scan.png").symlink_to(elsewhere / "scans" / "secret.png")
    (elsewhere / "alias").symlink_to(elsewhere / "scans")  # a listed link is resolved
    rows = [
        {"id": "listed", "file": str(elsewhere / "scans" / "secret.png")},
        {"id": "via-alias", "file": str(elsewhere / "alias" / "secret.png")},
        {"id": "link-to-listed", "file": "files/scan.png"},
        {"id": "not-listed", "file": str(elsewhere / "other" / "private.png")},
        {"id": "climb-out", "file": str(elsewhere / "alias" / ".." / "other" / "private.png")},
    ]
    wf = WF.replace(
        'attachments: ["{{ source.file }}"]',
        f'attachments: ["{{{{ source.file }}}}"]\n    attachment_folders: ["{elsewhere / "alias"}"]',
    )
    write_project(root, wf, data={"data/a.jsonl": rows})
    _run(root)
    assert _outcomes(root) == {
        "listed": ("answered", None),
        "via-alias": ("answered", None),
        "link-to-listed": ("answered", None),
        "not-listed": ("failed", "attachment_outside_project"),
        "climb-out": ("failed", "attachment_outside_project"),
    }


def test_i35_1_attachment_folders_in_defaults_must_be_folders(root: Path, elsewhere: Path) -> None:
    from agac.config import find_project, load_workflow
    from agac.errors import ConfigError

    wf = WF.replace(
        "retry: {max_attempts: 1}}",
        "retry: {max_attempts: 1}, attachment_folders: [../elsewhere/scans]}",
    )
    write_project(root, wf, data={"data/a.jsonl": [{"id": "a", "file": "files/a.png"}]})
    action = load_workflow("wf", find_project(root)).action("read")
    assert action.attachment_folders == ("../elsewhere/scans",)
    write_project(
        root,
        wf.replace("../elsewhere/scans", "../elsewhere/nothing"),
        data={"data/a.jsonl": [{"id": "a", "file": "files/a.png"}]},
    )
    with pytest.raises(ConfigError) as refused:
        load_workflow("wf", find_project(root))
    (problem,) = [p for p in refused.value.problems if "attachment_folders" in p.message]
    assert problem.code == "invalid_value" and "does not exist" in problem.message
    assert problem.line == 4


def test_i35_2_a_pipe_a_device_and_a_huge_file_each_fail_their_own_unit(
    root: Path,
) -> None:
    f = root / "files"
    (f / "good.png").write_bytes(png_bytes())
    os.mkfifo(f / "pipe.png")  # no writer: a blocking read would wait forever
    (f / "zero.png").symlink_to("/dev/zero")
    huge = f / "huge.png"
    huge.write_bytes(png_bytes())
    os.truncate(huge, MAX_FILE_BYTES + 1)  # sparse: costs no disk; stat says 2 GB + 1
    rows = [
        {"id": "good", "file": "files/good.png"},
        {"id": "pipe", "file": "files/pipe.png"},
        {"id": "zero", "file": "files/zero.png"},
        {"id": "huge", "file": "files/huge.png"},
        {"id": "good-2", "file": "files/good.png"},
    ]
    wf = WF.replace(
        'attachments: ["{{ source.file }}"]',
        'attachments: ["{{ source.file }}"]\n    attachment_folders: [/dev]',
    )
    write_project(root, wf, data={"data/a.jsonl": rows})
    result = _run(root)
    assert _outcomes(root) == {
        "good": ("answered", None),
        "good-2": ("answered", None),
        "pipe": ("failed", "attachment_not_regular_file"),
        "zero": ("failed", "attachment_not_regular_file"),
        "huge": ("failed", "attachment_too_large"),
    }
    assert result.summary["actions"]["read"]["reasons"] == {
        "attachment_not_regular_file": 2,
        "attachment_too_large": 1,
    }
    details = {r["key"]: r["detail"] for r in api.export_rows("wf", "read", root)}
    assert "named pipe" in details["pipe"] and "character device" in details["zero"]
    assert "it was not read" in details["huge"]
    assert "attachment_not_regular_file" in str(api.record_session("pipe", root))
