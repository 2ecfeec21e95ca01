"""Fixtures of the CLI tests: run the real ``agac`` console script in a subprocess.

Every call gets a clean environment (no ``AGAC_*`` settings or provider keys from the
developer's shell) plus whatever the test adds, its own working directory, and a
timeout. ``quickstart`` is one project made by ``agac init`` and run once, shared by
the read-only tests of a module.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Variables no CLI test inherits (conftest's isolation only covers this process).
_DROPPED_PREFIXES = (
    "AGAC_",
    "OPENAI_",
    "ANTHROPIC_",
    "GEMINI_",
    "GOOGLE_",
    "GROQ_",
    "OLLAMA_",
    "AZURE_",
    "DEEPSEEK_",
    "MISTRAL_",
    "TOGETHER_",
)


def _agac_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m``."""
    script = shutil.which("agac", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "agac.cli.main"]


AGAC = _agac_command()


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_PREFIXES)}
    env.pop("FORCE_COLOR", None)
    env["PYTHONWARNINGS"] = "error"
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Result:
    """One finished ``agac`` process."""

    args: tuple[str, ...]
    code: int
    out: str
    err: str

    def json(self) -> Any:
        """The whole of stdout as one JSON document (fails on anything else)."""
        return json.loads(self.out)

    def json_lines(self) -> list[Any]:
        """stdout as JSON Lines (one document per non-empty line)."""
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]

    def __str__(self) -> str:
        return f"agac {' '.join(self.args)} -> {self.code}\n--stdout--\n{self.out}\n--stderr--\n{self.err}"


def agac(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 240,  # a guard: only a hang reaches it, even on a loaded machine
    stdin: str | None = None,
) -> Result:
    """Run ``agac ARGS`` in ``cwd`` (with ``stdin`` as its input) and wait for it."""
    proc = subprocess.run(
        [*AGAC, *args],
        cwd=cwd,
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}),
    )
    return Result(tuple(args), proc.returncode, proc.stdout, proc.stderr)


def spawn(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``agac ARGS`` without waiting (for signals and concurrent runs)."""
    return subprocess.Popen(
        [*AGAC, *args],
        cwd=cwd,
        env=clean_env(env),
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[str]) -> None:
    """End a spawned ``agac`` whatever happened to the test (in a ``finally``): kill it if
    it still runs, reap it, and close its pipes — an open pipe left behind is a
    ResourceWarning that fails a later test."""
    try:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(ValueError, OSError, subprocess.TimeoutExpired):
            proc.communicate(timeout=240)
    finally:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class Quickstart:
    """The ``agac init --example quickstart`` project after one ``agac run --json``."""

    root: Path
    first_run: Result

    @property
    def summary(self) -> dict[str, Any]:
        return self.first_run.json()  # type: ignore[no-any-return]

    def agac(self, *args: str, env: Mapping[str, str] | None = None) -> Result:
        return agac(*args, cwd=self.root, env=env)


def leaf_commands(*, groups: bool = False) -> dict[str, Any]:
    """Every command a user can run, by its full name (``agac runs list``), generated from
    the Click app itself (lazy commands included), so a new command cannot be left out;
    with ``groups``, the groups too (``agac``, ``agac runs``)."""
    import click

    from agac.cli.main import cli

    found: dict[str, Any] = {}

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd, info_name=path[-1])
            if groups or cmd.invoke_without_command:
                found[" ".join(path)] = cmd
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                if not sub.hidden:
                    walk(sub, (*path, name))
        else:
            found[" ".join(path)] = cmd

    walk(cli, ("agac",))
    return found
