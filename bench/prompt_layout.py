"""The cost of the cache-friendly layout on the hot path: ``build_request`` per call.

Usage: python bench/prompt_layout.py [--calls 200000]

Builds one llm action's runtime (mock provider, a static system prompt, a prompt with a
literal head) and times ``build_request`` over distinct records, in process: ``plain``
(no ``context_prefix``: the request is built as it always was) and, where this agac has
``context_prefix``, ``prefixed`` (a 12,000-character prefix, ``cache: auto``, so every
request carries the shared hint). Prints one JSON line per case (microseconds a call,
the best of five rounds) and the load average.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from agac.config.model import Action
from agac.engine.actions import build_runtime
from agac.engine.requests import build_request

SYSTEM = "You label product reviews by their sentiment."
PROMPT = "Label this review as positive, negative or mixed.\n{{ source.text }}"


def _action(**extra: Any) -> Action:
    return Action(
        name="label",
        model="mock/m",
        provider="mock",
        model_name="m",
        system=SYSTEM,
        prompt=PROMPT,
        **extra,
    )


def _time(action: Action, root: Path, calls: int) -> float:
    kwargs = (
        {"workflow": "bench"} if "workflow" in inspect.signature(build_runtime).parameters else {}
    )
    rt = build_runtime(action, None, root, **kwargs)
    views = [{"source": {"text": f"Review {i}: arrived late, tastes fine."}} for i in range(calls)]
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for view in views:
            build_request(rt, view)
        best = min(best, time.perf_counter() - t0)
    return best / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp())
    cases = {"plain": _action()}
    if "context_prefix" in {f.name for f in dataclasses.fields(Action)}:
        cases["prefixed"] = _action(context_prefix="x", context_text="Policy. " * 1500)
    for name, action in cases.items():
        print(
            json.dumps(
                {
                    "case": name,
                    "calls": args.calls,
                    "us_per_call": round(_time(action, root, args.calls), 3),
                    "load": round(os.getloadavg()[0], 2),
                }
            )
        )


if __name__ == "__main__":
    main()
