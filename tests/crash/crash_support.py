"""What the crash tests share: ``agac`` run as a real process, to be killed or to recover."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def agac(
    root: Path, env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``agac ARGS`` in ``root`` with ``env`` over this process's environment, to its end
    (a crash point's SIGKILL included); its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        check=False,
        cwd=root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
