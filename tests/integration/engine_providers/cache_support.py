"""A run whose Gemini action asks for an explicit context cache (``cache: on``), for the
context cache tests.

The cache hint of an action (``ActionRuntime.cache`` and ``cache_texts``) is set where
the run assembles its actions' runtimes: :func:`hint_runtimes` wraps the assembly's
``build_runtime`` so that the action named ``ACTION`` carries ``cache: on`` with the
workflow's static prefix — in-process through a monkeypatch, in a subprocess through
:data:`RUNNER` (``python RUNNER_FILE run …``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from agac.testing import write_project

ACTION = "classify"
SYSTEM = "You label product reviews by the policy below."
PREFIX = "Policy. " + " ".join(f"Clause {i}: reviews that mention item {i} are neutral."
                                for i in range(120)) + " "
"""The prompt's literal head: over 1,024 tokens (Gemini Flash's cache minimum)."""


def workflow(model: str = "gemini/gemini-2.5-flash", *, run_mode: str = "online",
             concurrency: int = 2) -> str:
    lines = [
        "name: cached",
        "input: {path: data/, id_field: id}",
        "defaults:",
        f"  model: {model}",
        f"  max_concurrency: {concurrency}",
        "  max_tokens: 64",
        "  retry: {max_attempts: 2, backoff: {initial: 10ms, max: 20ms}}",
        f"  run_mode: {run_mode}",
        "actions:",
        f"  - name: {ACTION}",
        f"    system: {SYSTEM!r}",
        f"    prompt: {PREFIX + 'Review: {{ source.text }}'!r}",
    ]
    return "\n".join(lines) + "\n"


def make_project(root: Path, records: int = 4, transport: str = "lean", **options: Any) -> Path:
    data = [{"id": f"r{i:03d}", "text": f"review {i}"} for i in range(records)]
    return write_project(root, workflow(**options), workflow_file="cached.yml",
                         agac_yml=f"providers:\n  gemini: {{transport: {transport}}}\n",
                         data={"data/reviews.jsonl": data})


def with_hint(rt: Any) -> Any:
    """``rt`` asking for an explicit cache of its static prefix when it is ``ACTION``."""
    from agac.providers.base import CacheHint

    if rt.name != ACTION:
        return rt
    tokens = math.ceil((len(SYSTEM) + len(PREFIX)) / 4)
    rt.cache = CacheHint(mode="on", ttl="1h", system=True, static_chars=len(PREFIX),
                         prefix_tokens=tokens)
    rt.cache_texts = (SYSTEM, PREFIX)
    return rt


def hint_runtimes(monkeypatch: Any) -> None:
    """Have every run assembled in this process carry the hint (see module docstring)."""
    from agac.engine.lifecycle import assembly

    original = assembly.build_runtime
    monkeypatch.setattr(assembly, "build_runtime",
                        lambda *a, **kw: with_hint(original(*a, **kw)))


RUNNER = '''
import sys
sys.path.insert(0, {here!r})
import cache_support
from agac.engine.lifecycle import assembly
original = assembly.build_runtime
assembly.build_runtime = lambda *a, **kw: cache_support.with_hint(original(*a, **kw))
from agac.cli.main import main
sys.argv = ["agac", *sys.argv[1:]]
main()
'''


def runner_file(directory: Path) -> Path:
    """A script that runs the agac CLI with the hint set (for real subprocesses)."""
    path = directory / "agac_with_cache_hint.py"
    path.write_text(RUNNER.format(here=str(Path(__file__).parent)), encoding="utf-8")
    return path
