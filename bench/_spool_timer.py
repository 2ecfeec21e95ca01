"""``agac`` with the OpenAI adapter's batch-file writer timed (bench/attachments.py).

Runs ``agac ARGS`` in this process, after wrapping ``spool_jsonl`` as the OpenAI/Groq
adapters call it: each batch file's lines, bytes and seconds are appended as a JSON line
to the file ``AGAC_BENCH_SPOOL_LOG`` names. Nothing else changes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from agac.cli.main import cli
from agac.providers import _openai_compat

_spool = _openai_compat.spool_jsonl


def timed(*args: Any, **kwargs: Any) -> Any:
    t0 = time.perf_counter()
    spooled = _spool(*args, **kwargs)
    took = time.perf_counter() - t0
    with open(os.environ["AGAC_BENCH_SPOOL_LOG"], "a") as out:
        out.write(
            json.dumps({"lines": spooled.count, "bytes": spooled.size, "seconds": took}) + "\n"
        )
    return spooled


_openai_compat.spool_jsonl = timed  # type: ignore[assignment]

if __name__ == "__main__":
    sys.argv = ["agac", *sys.argv[1:]]
    cli()
