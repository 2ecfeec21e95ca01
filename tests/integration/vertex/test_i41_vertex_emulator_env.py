"""``agac emulator env`` points Vertex AI at the emulator as it points every other
provider: its exports, evaluated by a shell and nothing else, are enough for
``vertex/…`` models to run live and in batch (the key file it writes signs in at the
emulator's token endpoint; the batch's Cloud Storage is the emulator's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from vertex_support import BUCKET, MODEL

from agac.cli.emulator import emulator as emulator_command
from agac.testing import write_project

WF = f"""
name: envcheck
input: {{path: data/, id_field: id}}
defaults:
  model: vertex/{MODEL}
  max_tokens: 64
  schema: {{type: object, properties: {{label: {{enum: [a, b]}}}}, required: [label]}}
actions:
  - name: live
    prompt: "Classify: {{{{ source.text }}}}"
  - name: batched
    run_mode: batch
    prompt: "Label: {{{{ source.text }}}}"
"""


def _exported(port: int) -> dict[str, str]:
    """What a shell has after ``eval "$(agac emulator env --port PORT)"`` (and nothing
    else but PATH)."""
    printed = CliRunner().invoke(emulator_command, ["env", "--port", str(port)])
    assert printed.exit_code == 0, printed.output
    shell = subprocess.run(
        ["sh", "-c", f'eval "{printed.output}"; env -0'],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ.get("PATH", "")},
    )
    pairs = (entry.partition("=") for entry in shell.stdout.split("\0") if entry)
    return {name: value for name, _, value in pairs if name not in ("PATH", "PWD", "SHLVL", "_")}


def test_i41_vertex_emulator_env_exports_project_location_endpoint_key_and_storage(
    emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = _exported(emulator.port)
    root = f"http://127.0.0.1:{emulator.port}"
    key = tmp_path / "cache" / "agac" / "emulator" / f"127.0.0.1-{emulator.port}"
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == str(key / "service-account.json")
    assert env["GOOGLE_SERVICE_ACCOUNT"] == env["GOOGLE_APPLICATION_CREDENTIALS"]
    written = json.loads(Path(env["GOOGLE_APPLICATION_CREDENTIALS"]).read_text())
    assert written["type"] == "service_account"
    assert (written["token_uri"], written["gcs_base_url"]) == (
        f"{root}/vertex/token",
        f"{root}/gcs",
    )
    assert env["GOOGLE_CLOUD_PROJECT"] == written["project_id"]
    assert env["GOOGLE_CLOUD_LOCATION"] == "us-central1"
    assert env["GOOGLE_VERTEX_BASE_URL"] == root
    assert env["NO_GCE_CHECK"] == "true"  # no metadata server looked for
    assert env["OPENAI_BASE_URL"] == f"{root}/v1"  # the other providers' are still there


def test_i41_vertex_emulator_env_is_all_a_vertex_run_needs(
    emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agac run`` in a shell with the exports alone (no other Google variable, a home
    of its own): a live action and a batch action on ``vertex/…`` both answered by the
    emulator, the batch's lines and output in the emulator's Cloud Storage."""
    emulator.hold_clock()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = {
        **_exported(emulator.port),
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "HOME": str(tmp_path / "home"),
    }
    proj = tmp_path / "proj"
    rows = {"data/a.jsonl": [{"id": f"r{i}", "text": f"item {i}"} for i in range(3)]}
    agac_yml = f"providers:\n  vertex: {{batch_bucket: gs://{BUCKET}/env-check}}\n"
    write_project(proj, WF, workflow_file="envcheck.yml", data=rows, agac_yml=agac_yml)

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agac.cli.main", "run", "envcheck", "--json"],
            cwd=proj,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,  # a guard against a hang only
            check=False,
        )

    first = run()
    assert first.returncode == 75, first.stderr
    assert any(k.startswith(f"{BUCKET}/env-check/") for k in emulator.state.objects)
    emulator.advance(3600)
    done = run()
    assert done.returncode == 0, done.stderr
    actions = json.loads(done.stdout)["actions"]
    assert actions["live"]["answered"] == actions["batched"]["answered"] == 3
    ops = emulator.stats()["requests"]["vertex"]
    assert (ops["chat"], ops["batch.create"], emulator.stats()["answered"]) == (3, 1, 6)
    assert emulator.state.google_tokens  # signed in at the emulator's token endpoint


def test_i41_vertex_emulator_env_says_why_when_the_key_cannot_be_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cache folder that cannot be written: the other providers' exports are printed,
    and a comment line (which a shell's eval skips) names the folder instead of Vertex's."""
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/agac-nowhere")
    printed = CliRunner().invoke(emulator_command, ["env", "--port", "9912"])
    assert printed.exit_code == 0, printed.output
    lines = printed.output.splitlines()
    assert "export OPENAI_BASE_URL=http://127.0.0.1:9912/v1" in lines
    assert not any("GOOGLE_APPLICATION_CREDENTIALS" in line for line in lines)
    assert lines[-1].startswith(
        "# no Vertex AI exports: cannot write /proc/agac-nowhere/agac/emulator/127.0.0.1-9912"
    )
