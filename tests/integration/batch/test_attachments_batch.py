"""Issue 22 item 5 (and issue 35 items 1 and 2): records that attach files, in batch — every provider's batch API
through its official SDK against the emulator; batch files split by bytes (the files'
base64 counted) as well as by request count; a file that changed before its line was
written is never sent under the old fingerprint. B0–B12 hold as for text (their own
suites run the same engine)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from batch_support import creates, rows, run

from agac.emulator.testing import RunningEmulator
from agac.media import MAX_FILE_BYTES, describe_file
from agac.samplefiles import pdf_bytes, png_bytes, png_of_size
from agac.testing import write_project

BATCH_SECONDS = 60.0
"""As the suite's emulator is started (conftest.py)."""

MODELS = {
    "openai": "openai/gpt-4o-mini",
    "anthropic": "anthropic/claude-haiku-4-5",
    "gemini": "gemini/gemini-2.5-flash",
    "groq": "groq/meta-llama/llama-4-scout-17b-16e-instruct",
}


def _workflow(model: str) -> str:
    return f"""
name: bw
input: {{path: data/, id_field: id}}
defaults: {{model: {model}, run_mode: batch, max_tokens: 64, retry: {{max_attempts: 2}}}}
actions:
  - name: classify
    prompt: "Describe record {{{{ source.id }}}}"
    attachments: ["{{{{ source.file }}}}"]
"""


def _make(root: Path, provider: str, files: dict[str, bytes]) -> None:
    (root / "files").mkdir(exist_ok=True)
    for name, data in files.items():
        (root / "files" / name).write_bytes(data)
    write_project(
        root,
        _workflow(MODELS[provider]),
        data={"data/a.jsonl": [{"id": Path(n).stem, "file": f"files/{n}"} for n in files]},
    )


def _said(root: Path, name: str) -> str:
    a = describe_file(str(root / "files" / name))
    return f"{a.media_type} {a.size} bytes sha256:{a.sha256[:16]}"


def _collect(root: Path, emulator: RunningEmulator) -> Any:
    first = run(root)
    assert first.exit_code == 75, first.summary
    emulator.advance(BATCH_SECONDS + 1)
    return run(root)


@pytest.mark.parametrize("provider", list(MODELS))
def test_i22_5_a_batch_of_files_is_sent_collected_and_each_answer_names_its_file(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    files = {f"p{i}.png": png_bytes(8 + i, 8, seed=i) for i in range(3)}
    if provider != "groq":
        files["doc.pdf"] = pdf_bytes(2)
    _make(project, provider, files)
    done = _collect(project, emulator)
    assert done.summary["actions"]["classify"]["answered"] == len(files), done.summary
    got = rows(project)
    for name in files:
        assert _said(project, name) in got[Path(name).stem]["output"]["text"]


def test_i22_5_batch_files_split_by_bytes_with_the_base64_counted(
    emulator: RunningEmulator, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agac.providers.openai import OpenAIProvider

    # 12 images of ~50 KB: ~68 KB of base64 a line; a 300 KB file (270 KB with margin)
    # holds three of them, so the one input file goes as four provider batches.
    monkeypatch.setattr(
        OpenAIProvider,
        "spec",
        dataclasses.replace(
            OpenAIProvider.spec,
            batch=dataclasses.replace(OpenAIProvider.spec.batch, max_bytes=300_000),
        ),
    )
    files = {f"i{i:02d}.png": png_of_size(50_000, seed=i) for i in range(12)}
    _make(project, "openai", files)
    done = _collect(project, emulator)
    assert done.summary["actions"]["classify"]["answered"] == 12
    assert creates(emulator.stats(), "openai") == 4


def test_i22_5_a_file_changed_before_its_batch_line_is_never_sent(
    emulator: RunningEmulator, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agac.engine.batch import submission

    files = {"keep.png": png_bytes(seed=1), "edit.png": png_bytes(seed=2)}
    _make(project, "openai", files)
    staged = submission._staged_attachments

    def edited_then_staged(*args: Any) -> Any:
        (project / "files" / "edit.png").write_bytes(png_bytes(seed=3))  # after admission
        return staged(*args)

    monkeypatch.setattr(submission, "_staged_attachments", edited_then_staged)
    done = _collect(project, emulator)
    got = rows(project)
    assert got["keep"]["status"] == "answered"
    assert (got["edit"]["status"], got["edit"]["reason"]) == ("failed", "attachment_changed")
    assert done.summary["actions"]["classify"]["calls"] == 1


def test_i22_5_a_file_changed_while_its_line_is_written_sends_nothing(
    emulator: RunningEmulator, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agac.providers import _common

    files = {"keep.png": png_bytes(seed=1), "edit.png": png_bytes(seed=2)}
    _make(project, "openai", files)
    write = _common.write_base64
    edits = []

    def changed_on_the_way(att: Any, out: Any) -> int:
        if att.name == "edit.png" and not edits:
            edits.append(att)
            (project / "files" / "edit.png").write_bytes(png_bytes(seed=4))
        return write(att, out)

    monkeypatch.setattr(_common, "write_base64", changed_on_the_way)
    _collect(project, emulator)
    got = rows(project)
    assert got["keep"]["status"] == "answered"
    assert (got["edit"]["status"], got["edit"]["reason"]) == ("failed", "attachment_changed")
    assert creates(emulator.stats(), "openai") == 1, "the file with the changed line was not sent"


def test_i35_1_and_2_in_batch_no_bad_path_reaches_a_batch_line(
    emulator: RunningEmulator, project: Path, tmp_path: Path
) -> None:
    files = {"keep.png": png_bytes(seed=1), "also.png": png_bytes(seed=2)}
    _make(project, "openai", files)
    secret = tmp_path / "secret.png"
    secret.write_bytes(png_bytes(seed=9))
    (project / "files" / "out.png").symlink_to(secret)
    os.mkfifo(project / "files" / "pipe.png")
    huge = project / "files" / "huge.png"
    huge.write_bytes(png_bytes())
    os.truncate(huge, MAX_FILE_BYTES + 1)  # sparse; OpenAI takes 20 MB an image
    extra = [
        {"id": "out", "file": "files/out.png"},
        {"id": "abs", "file": str(secret)},
        {"id": "pipe", "file": "files/pipe.png"},
        {"id": "huge", "file": "files/huge.png"},
    ]
    with (project / "data" / "a.jsonl").open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in extra)
    done = _collect(project, emulator)
    got = {k: (r["status"], r["reason"]) for k, r in rows(project).items()}
    assert got == {
        "keep": ("answered", None),
        "also": ("answered", None),
        "out": ("failed", "attachment_outside_project"),
        "abs": ("failed", "attachment_outside_project"),
        "pipe": ("failed", "attachment_not_regular_file"),
        "huge": ("failed", "attachment_too_large"),
    }
    assert done.summary["actions"]["classify"]["answered"] == 2
    assert creates(emulator.stats(), "openai") == 1


def test_i35_2_a_file_that_became_a_pipe_before_its_line_is_written_sends_nothing(
    emulator: RunningEmulator, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agac.providers import _common

    files = {"keep.png": png_bytes(seed=1), "swap.png": png_bytes(seed=2)}
    _make(project, "openai", files)
    write = _common.write_base64
    swapped: list[Any] = []

    def a_pipe_on_the_way(att: Any, out: Any) -> int:
        if att.name == "swap.png" and not swapped:
            swapped.append(att)
            target = project / "files" / "swap.png"
            target.unlink()
            os.mkfifo(target)  # no writer: a blocking open would hang the submission
        return write(att, out)

    monkeypatch.setattr(_common, "write_base64", a_pipe_on_the_way)
    _collect(project, emulator)
    got = rows(project)
    assert swapped and got["keep"]["status"] == "answered"
    assert (got["swap"]["status"], got["swap"]["reason"]) == (
        "failed",
        "attachment_not_regular_file",
    )
