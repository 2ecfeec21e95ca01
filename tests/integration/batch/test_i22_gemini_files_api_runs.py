"""Issue 22: whole runs whose records attach files over Gemini's 20 MB inline limit —
live and in batch, through agac's engine and the official SDK (batches) or the lean
transport (live) against the emulator. Each file goes up once per run through the Files
API, every record's answer names its own file, and the store holds no bytes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from batch_support import creates, rows, run

from agac.emulator.testing import RunningEmulator
from agac.media import describe_file
from agac.samplefiles import pdf_of_size, png_bytes, png_of_size
from agac.testing import write_project

BATCH_SECONDS = 60.0
"""As the suite's emulator is started (conftest.py)."""


def _workflow(mode: str) -> str:
    return f"""
name: bw
input: {{path: data/, id_field: id}}
defaults: {{model: gemini/gemini-2.5-flash, run_mode: {mode}, max_tokens: 64,
           retry: {{max_attempts: 1}}}}
actions:
  - name: classify
    prompt: "Describe record {{{{ source.id }}}}"
    attachments: ["{{{{ source.file }}}}"]
"""


@pytest.fixture(scope="module")
def big() -> dict[str, bytes]:
    return {"png": png_of_size(25_000_000, seed=11), "pdf": pdf_of_size(25_000_000, 2, seed=11)}


def _make(root: Path, mode: str, big: dict[str, bytes]) -> dict[str, str]:
    """Four records: two attach the same 25 MB PNG (under two names), one a 25 MB PDF,
    one a small PNG. Returns id -> its file name."""
    files = {
        "scan_a": ("scan_a.png", big["png"]),
        "scan_b": ("scan_b.png", big["png"]),
        "contract": ("contract.pdf", big["pdf"]),
        "thumb": ("thumb.png", png_bytes(seed=2)),
    }
    (root / "files").mkdir()
    for name, data in files.values():
        (root / "files" / name).write_bytes(data)
    write_project(
        root,
        _workflow(mode),
        data={
            "data/a.jsonl": [
                {"id": key, "file": f"files/{name}"} for key, (name, _) in files.items()
            ]
        },
    )
    return {key: name for key, (name, _) in files.items()}


def _said(root: Path, name: str) -> str:
    a = describe_file(str(root / "files" / name))
    return f"{a.media_type} {a.size} bytes sha256:{a.sha256[:16]}"


def _finalized(emulator: RunningEmulator) -> list[str]:
    return [r["body"]["sha256"] for r in emulator.requests() if r["op"] == "file.finalize"]


def _check_answers(root: Path, names: dict[str, str]) -> None:
    got = rows(root)
    for key, name in names.items():
        assert got[key]["status"] == "answered", got[key]
        assert _said(root, name) in got[key]["output"]["text"], key
    store = (root / ".agac").rglob("*.db")
    assert all(p.stat().st_size < 5_000_000 for p in store), "the store holds no file bytes"


def test_i22_gemini_files_api_an_online_run_uploads_each_big_file_once(
    emulator: RunningEmulator, project: Path, big: dict[str, bytes]
) -> None:
    names = _make(project, "online", big)
    done = run(project)
    assert done.exit_code == 0, done.summary
    _check_answers(project, names)
    uploaded = _finalized(emulator)
    assert len(uploaded) == 2 == len(set(uploaded)), "the PNG once for two records, the PDF once"
    ops = emulator.stats()["requests"]["gemini"]
    assert ops.get("file.delete") == 2, "the run's online uploads are deleted when it ends"


def test_i22_gemini_files_api_a_batch_run_names_uploaded_files_in_its_lines(
    emulator: RunningEmulator, project: Path, big: dict[str, bytes]
) -> None:
    names = _make(project, "batch", big)
    first = run(project)
    assert first.exit_code == 75, first.summary
    assert creates(emulator.stats(), "gemini") == 1
    uploaded = _finalized(emulator)
    assert len(uploaded) == 2 == len(set(uploaded))
    emulator.advance(BATCH_SECONDS + 1)
    done = run(project)
    assert done.exit_code == 0, done.summary
    _check_answers(project, names)
    assert not emulator.stats()["requests"]["gemini"].get("file.delete"), (
        "a batch's uploads are left to expire (48 h)"
    )


def test_i22_gemini_files_api_a_batch_part_counts_uploaded_files_as_their_parts(
    emulator: RunningEmulator, project: Path, big: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 60 MB batch limit (54 MB with margin): counted as base64, each 25 MB file's line
    would fill a part of its own (three batches); as the line carries it — a file_data
    part naming the upload — the four records go as one batch."""
    from agac.providers.gemini import GeminiProvider

    monkeypatch.setattr(
        GeminiProvider,
        "spec",
        dataclasses.replace(
            GeminiProvider.spec,
            batch=dataclasses.replace(GeminiProvider.spec.batch, max_bytes=60_000_000),
        ),
    )
    names = _make(project, "batch", big)
    first = run(project)
    assert first.exit_code == 75, first.summary
    assert creates(emulator.stats(), "gemini") == 1
    emulator.advance(BATCH_SECONDS + 1)
    done = run(project)
    assert done.exit_code == 0, done.summary
    _check_answers(project, names)
