"""Issue 35 (Hardening, third pass), items 1 and 2, from the command line: records naming
a file out of the project (absolute, through a link), a named pipe, a link to
``/dev/zero`` and a sparse file over 2 GB. ``agac validate`` names each at its data line,
``agac run`` finishes without reading any of them, the other records are answered, and
each reason shows in ``agac status``, ``agac export`` and ``agac records show``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cli_support import agac

from agac.media import MAX_FILE_BYTES
from agac.samplefiles import png_bytes
from agac.testing import write_project

WF = """
name: scans
input: {path: data/scans.jsonl, id_field: id}
defaults: {model: mock/vision, retry: {max_attempts: 1}}
actions:
  - name: read
    prompt: "What is on scan {{ source.id }}?"
    attachments: ["{{ source.file }}"]
"""


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    files = root / "files"
    files.mkdir(parents=True)
    (files / "a.png").write_bytes(png_bytes())
    (files / "b.png").write_bytes(png_bytes(seed=1))
    secret = tmp_path / "home" / "scan.png"
    secret.parent.mkdir()
    secret.write_bytes(png_bytes(seed=9))
    (files / "linked.png").symlink_to(secret)
    os.mkfifo(files / "pipe.png")
    (files / "zero.png").symlink_to("/dev/zero")
    (files / "huge.png").write_bytes(png_bytes())
    os.truncate(files / "huge.png", MAX_FILE_BYTES + 1)
    rows = [
        {"id": "a", "file": "files/a.png"},
        {"id": "home", "file": str(secret)},
        {"id": "linked", "file": "files/linked.png"},
        {"id": "pipe", "file": "files/pipe.png"},
        {"id": "zero", "file": "files/zero.png"},
        {"id": "huge", "file": "files/huge.png"},
        {"id": "b", "file": "files/b.png"},
    ]
    write_project(root, WF, data={"data/scans.jsonl": rows}, workflow_file="workflows/scans.yml")
    return root


WANT = {
    "a": ("answered", None),
    "b": ("answered", None),
    "home": ("failed", "attachment_outside_project"),
    "linked": ("failed", "attachment_outside_project"),
    "pipe": ("failed", "attachment_not_regular_file"),
    "zero": ("failed", "attachment_outside_project"),  # /dev is not listed
    "huge": ("failed", "attachment_too_large"),
}


def test_i35_1_and_2_paths_from_data_through_validate_run_status_export_and_session(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    checked = agac("validate", "scans", "--json", cwd=root, timeout=120)
    assert checked.code == 0, checked  # each bad record fails alone: warnings, not errors
    warned = {(w["code"], w["line"]) for w in checked.json()["warnings"]}
    assert {
        ("attachment_outside_project", 2),
        ("attachment_outside_project", 3),
        ("attachment_not_regular_file", 4),
        ("attachment_too_large", 6),
    } <= warned, warned
    ran = agac("run", "scans", "--json", cwd=root, timeout=120)
    assert ran.code == 1, ran  # partial: some units failed
    summary = ran.json()["actions"]["read"]
    assert summary["answered"] == 2
    assert summary["reasons"] == {
        "attachment_outside_project": 3,
        "attachment_not_regular_file": 1,
        "attachment_too_large": 1,
    }
    status = agac("status", "scans", "--json", cwd=root)
    assert status.code == 0, status
    assert status.json()["actions"]["read"]["reasons"] == summary["reasons"]
    exported = agac("export", "scans", "--action", "read", cwd=root)
    rows = {r["key"]: r for r in map(json.loads, exported.out.splitlines())}
    assert {k: (r["status"], r["reason"]) for k, r in rows.items()} == WANT
    assert "scan.png" in rows["linked"]["detail"]  # where the link leads
    shown = agac("records", "show", "pipe", "--workflow", "scans", "--json", cwd=root).json()
    (read,) = shown["actions"]
    assert (read["status"], read["reason"]) == ("failed", "attachment_not_regular_file")
    assert "named pipe" in read["detail"]
