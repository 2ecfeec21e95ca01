"""pandas, polars and pyarrow are the optional ``data`` extra (docs/python.md): importing agac
and reaching its Python API imports none of them; only a call that needs one does."""

from __future__ import annotations

import subprocess
import sys

DATA_LIBRARIES = ("pandas", "polars", "pyarrow")


def test_importing_agac_and_its_api_imports_no_data_library() -> None:
    code = (
        "import sys, agac, agac.api\n"
        "from agac.api import inline, progress, results, runs, threads\n"
        "for name in ('run', 'arun', 'results', 'Results', 'RunResult', 'export', 'plan'):\n"
        "    getattr(agac, name)\n"
        f"print(sorted(m for m in {DATA_LIBRARIES!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stderr
