"""A file that changes between a batch's staging and its submission (docs/guarantees.md,
S5): the run is SIGKILLed after the batch intent is stored and before the provider is
asked, one attached file is rewritten, and the run continues. That record fails
``attachment_changed``; the others are submitted and answered; nothing reaches the
provider under the old fingerprint — no batch line, no Files API upload of other bytes."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from crash_support import agac

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.media import describe_file
from agac.samplefiles import png_bytes, png_of_size
from agac.testing import write_project

WF = """
name: acrash
input: {path: data/, id_field: id}
defaults: {model: MODEL, run_mode: batch, max_tokens: 64, retry: {max_attempts: 2}}
actions:
  - name: describe
    prompt: "Describe record {{ source.id }}"
    attachments: ["{{ source.file }}"]
"""


def _files(model: str) -> dict[str, bytes]:
    """Three small pictures; on Gemini the one that changes is over the inline limit, so
    its batch line would name an upload."""
    files = {f"p{i}.png": png_bytes(8 + i, 8, seed=i) for i in range(3)}
    files["edit.png"] = (
        png_of_size(25_000_000, seed=5)
        if model.startswith("gemini/")
        else png_bytes(12, 12, seed=5)
    )
    return files


@pytest.mark.parametrize("model", ["gemini/gemini-2.5-flash", "openai/gpt-4o-mini"])
def test_s5_attachment_changed_between_staging_and_submit(tmp_path: Path, model: str) -> None:
    files = _files(model)
    (tmp_path / "files").mkdir()
    for name, data in files.items():
        (tmp_path / "files" / name).write_bytes(data)
    write_project(
        tmp_path,
        WF.replace("MODEL", model),
        workflow_file="acrash.yml",
        data={"data/a.jsonl": [{"id": Path(n).stem, "file": f"files/{n}"} for n in files]},
    )
    old = describe_file(str(tmp_path / "files" / "edit.png"))
    provider = model.split("/")[0]
    with RunningEmulator(batch_seconds=60) as emu:
        emu.hold_clock()  # batches progress only when advanced
        env = emu.env()
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": "before_submit:1"}, "run", "acrash")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        assert not emu.stats()["requests"].get(provider, {}).get("batch.create")
        data = files["edit.png"]
        middle = len(data) // 2  # other pixels, the same size: still a valid PNG header
        (tmp_path / "files" / "edit.png").write_bytes(
            data[:middle] + bytes(a ^ 0xFF for a in data[middle : middle + 8]) + data[middle + 8 :]
        )
        first = agac(tmp_path, env, "run", "acrash", "--json")
        assert first.returncode == 75, first.stderr
        emu.advance(120)
        done = agac(tmp_path, env, "run", "acrash", "--json")
        assert done.returncode == 1, done.stderr  # partial: one unit failed
        summary = json.loads(done.stdout)
        assert summary["actions"]["describe"]["answered"] == 3, summary
        got = {r["key"]: r for r in api.export_rows("acrash", "describe", tmp_path)}
        assert (got["edit"]["status"], got["edit"]["reason"]) == ("failed", "attachment_changed")
        for i in range(3):
            att = describe_file(str(tmp_path / "files" / f"p{i}.png"))
            assert got[f"p{i}"]["status"] == "answered"
            assert att.sha256[:16] in got[f"p{i}"]["output"]["text"]
        stats = emu.stats()
        assert stats["requests"][provider]["batch.create"] == 1
        answers = " ".join(str(r["output"]) for r in got.values())
        assert old.sha256[:16] not in answers, "nothing answered under the old fingerprint"
        uploaded = [r["body"]["sha256"] for r in emu.requests() if r["op"] == "file.finalize"]
        assert old.sha256 not in uploaded, "the old fingerprint's file never went up"
        assert not uploaded, "the edited file's new bytes are not sent either (its unit failed)"
