"""Providers, part 2: records that attach files on Mistral and Together, through the
engine against the emulator — online and in batch — with what cannot go refused before
anything is paid: a PDF to Together (it reads images only) fails its own record
``attachment_not_supported`` and is never sent; a text-only model is refused at
validation; a path outside the project never reaches a request (the existing rule)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from batch_support import creates, rows, run

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.media import describe_file
from agac.samplefiles import pdf_bytes, png_bytes
from agac.testing import write_project

BATCH_SECONDS = 60.0
"""As the suite's emulator is started (conftest.py)."""

MODELS = {
    "mistral": "mistral/mistral-small-latest",
    "together": "together/meta-llama/Llama-4-Scout-17B-16E-Instruct",
}


def _workflow(model: str, run_mode: str) -> str:
    return f"""
name: bw
input: {{path: data/, id_field: id}}
defaults: {{model: {model}, run_mode: {run_mode}, max_tokens: 64, retry: {{max_attempts: 2}}}}
actions:
  - name: classify
    prompt: "Describe record {{{{ source.id }}}}"
    attachments: ["{{{{ source.file }}}}"]
"""


def _make(
    root: Path,
    model: str,
    files: dict[str, bytes],
    run_mode: str,
    extra: tuple[dict[str, Any], ...] = (),
    agac_yml: str = "",
) -> None:
    (root / "files").mkdir(exist_ok=True)
    for name, data in files.items():
        (root / "files" / name).write_bytes(data)
    listed = [{"id": Path(n).stem, "file": f"files/{n}"} for n in files]
    rows_ = [*listed, *extra]
    write_project(root, _workflow(model, run_mode), data={"data/a.jsonl": rows_}, agac_yml=agac_yml)


def _said(root: Path, name: str) -> str:
    a = describe_file(str(root / "files" / name))
    return f"{a.media_type} {a.size} bytes sha256:{a.sha256[:16]}"


def _chats(emulator: RunningEmulator, provider: str) -> int:
    return sum(1 for r in emulator.requests() if r["op"] == "chat" and r["provider"] == provider)


@pytest.mark.parametrize("provider", list(MODELS))
def test_providers_part_2_online_each_answer_names_its_file_and_a_path_outside_stays_out(
    provider: str, emulator: RunningEmulator, project: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.png"
    secret.write_bytes(png_bytes(seed=9))
    files = {"a.png": png_bytes(seed=1), "b.png": png_bytes(9, 9, seed=2)}
    if provider == "mistral":
        files["doc.pdf"] = pdf_bytes(2)
    _make(project, MODELS[provider], files, "online", ({"id": "abs", "file": str(secret)},))
    done = run(project)
    assert done.summary["actions"]["classify"]["answered"] == len(files), done.summary
    got = rows(project)
    for name in files:
        assert _said(project, name) in got[Path(name).stem]["output"]["text"]
    assert (got["abs"]["status"], got["abs"]["reason"]) == ("failed", "attachment_outside_project")
    assert _chats(emulator, provider) == len(files), "the outside path was never sent"


def test_providers_part_2_together_refuses_a_pdf_before_anything_is_paid(
    emulator: RunningEmulator, project: Path
) -> None:
    files = {"a.png": png_bytes(seed=1), "doc.pdf": pdf_bytes(2)}
    _make(project, MODELS["together"], files, "online")
    done = run(project)
    got = rows(project)
    assert got["a"]["status"] == "answered"
    assert (got["doc"]["status"], got["doc"]["reason"]) == ("failed", "attachment_not_supported")
    assert "together" in got["doc"]["detail"] and "PDF" in got["doc"]["detail"]
    assert _chats(emulator, "together") == 1, "the PDF never left"
    assert done.summary["actions"]["classify"]["answered"] == 1


@pytest.mark.parametrize(
    "model", ["mistral/codestral-latest", "together/meta-llama/Llama-3.3-70B-Instruct-Turbo"]
)
def test_providers_part_2_a_text_only_model_with_attachments_is_refused_at_validation(
    model: str, emulator: RunningEmulator, project: Path
) -> None:
    _make(project, model, {"a.png": png_bytes()}, "online")
    _, findings = api.validate("bw", project)
    refused = [f for f in findings if f.code == "attachment_not_supported"]
    assert refused, findings
    assert "cannot take" in refused[0].message and model.split("/", 1)[1] in refused[0].message
    with pytest.raises(Exception, match="attachment_not_supported|cannot take"):
        run(project)
    assert _chats(emulator, model.split("/")[0]) == 0


@pytest.mark.parametrize(
    ("provider", "agac_yml"),
    [
        ("mistral", "providers: {mistral: {batch_input: inline}}\n"),
        ("mistral", "providers: {mistral: {batch_input: file}}\n"),
        ("together", ""),
    ],
    ids=["mistral-inline", "mistral-file", "together"],
)
def test_providers_part_2_a_batch_of_files_is_sent_collected_and_named(
    provider: str, agac_yml: str, emulator: RunningEmulator, project: Path
) -> None:
    files = {f"p{i}.png": png_bytes(8 + i, 8, seed=i) for i in range(3)}
    if provider == "mistral":
        files["doc.pdf"] = pdf_bytes(2)
    _make(project, MODELS[provider], files, "batch", agac_yml=agac_yml)
    first = run(project)
    assert first.exit_code == 75, first.summary
    emulator.advance(BATCH_SECONDS + 1)
    done = run(project)
    assert done.summary["actions"]["classify"]["answered"] == len(files), done.summary
    got = rows(project)
    for name in files:
        assert _said(project, name) in got[Path(name).stem]["output"]["text"]
    assert creates(emulator.stats(), provider) == 1
    assert _chats(emulator, provider) == 0, "all went in the batch"
