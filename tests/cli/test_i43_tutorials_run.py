"""Issue 43 item 2 (The newcomer's path): every tutorial runs as written from what
``agac init`` creates. The ``$ `` lines of each tutorial's ``console`` blocks are run, in
order, by one bash shell in an empty folder (offline: the mock provider, or the emulator the
tutorial starts itself, on a free port instead of 8765). Each command must succeed, and a
documented ``$ echo $?`` must print the exit code the tutorial shows after it."""

from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest
from cli_support import AGAC, clean_env

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tutorials"
RUNNABLE = ("online.md", "batch.md", "quality.md", "tools.md")
"""The tutorials a single user runs on one machine (the team tutorial needs a server)."""

_BLOCK = re.compile(r'^```(console|\w+ title="([^"]+)")\n(.*?)^```', re.DOTALL | re.MULTILINE)


def _steps(text: str) -> list[tuple[str, str | None]]:
    """(command, the exit code documented after it when it is ``echo $?``). A block with a
    ``title="PATH"`` is a file the reader writes: a step that writes it, in its place."""
    steps: list[tuple[str, str | None]] = []
    for kind, path, block in _BLOCK.findall(text):
        if kind != "console":
            steps.append(
                (
                    f"mkdir -p \"$(dirname '{path}')\" && cat > '{path}' <<'AGAC_EOF'\n{block}AGAC_EOF",
                    None,
                )
            )
            continue
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ "):
                continue
            command = line[2:].split("   #")[0].strip()
            shown = lines[i + 1].strip() if i + 1 < len(lines) else None
            steps.append((command, shown if command.startswith("echo $?") else None))
    return steps


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _script(steps: list[tuple[str, str | None]], port: int, bin_dir: Path) -> str:
    """The tutorial's commands as one bash script; ``agac`` is a wrapper in ``bin_dir``
    that ``exec``s the console script, so a server started with ``&`` is the shell's own
    job and is stopped at the end (an orphan would hold the output pipes open)."""
    bin_dir.mkdir()
    wrapper = bin_dir / "agac"
    quoted = " ".join(f"'{part}'" for part in AGAC)
    wrapper.write_text(f'#!/bin/sh\nexec {quoted} "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    out = [f'export PATH="{bin_dir}:$PATH"']
    for n, (command, _) in enumerate(steps):
        command = command.replace("8765", str(port))
        out.append(command)
        if command.endswith("&"):  # a server started in the background: wait until it listens
            out.append(
                f"for _ in $(seq 300); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null "
                "&& break; sleep 0.2; done"
            )
        out.append(f'__rc=$?; echo "@@step {n} rc=$__rc" >&2; (exit $__rc)')
    out.append("kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; true")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("tutorial", RUNNABLE)
def test_i43_2_every_tutorial_runs_as_written(tutorial: str, tmp_path: Path) -> None:
    steps = _steps((DOCS / tutorial).read_text(encoding="utf-8"))
    assert steps and steps[0][0].startswith("agac init"), steps[:1]
    work = tmp_path / "work"
    work.mkdir()
    script = _script(steps, _free_port(), tmp_path / "bin")
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    codes = dict(re.findall(r"^@@step (\d+) rc=(\d+)$", proc.stderr, re.MULTILINE))
    assert len(codes) == len(steps), proc.stderr
    echoed = proc.stdout
    for n, (command, shown) in enumerate(steps):
        following_echo = n + 1 < len(steps) and steps[n + 1][1] is not None
        if not following_echo:
            assert codes[str(n)] == "0", (command, proc.stdout[-3000:], proc.stderr[-3000:])
        if shown is not None:
            assert re.search(rf"^{re.escape(shown)}$", echoed, re.MULTILINE), (
                command,
                shown,
                echoed,
            )
