"""Issue 38 figure: a pilot of 200 records projects the full run's batch cost, and the full
run after it sends only the rest.

Usage: python bench/pilot.py [--records 20000] [--sample 200] [--seed 1] [--port 18768]

One fresh project under bench/out/pilot-<records>/ with a one-action batch workflow
(``model: openai/gpt-4o-mini``, a JSON schema) over reviews whose length varies (one to
twelve sentences), so records cost different amounts. The emulator and every ``agac``
command run as separate processes:

1. **pilot**: ``agac pilot wf.yml --sample N --seed S --json`` (online: a pilot never waits
   for a batch); its projection of the batch tier is kept.
2. **full run**: ``agac run wf.yml --json`` submits the batches (exit 75), the emulator's
   clock moves past them, ``agac run wf.yml --json`` collects (exit 0).
3. What the whole input cost at the batch rate is the full run's ledger (the records the
   pilot did not answer, billed at the batch tier) plus the pilot's records priced at the
   batch rate (the projection's ``sample_usd``). Printed: the projection, the measured
   cost, the error of the estimate, whether the measured cost is inside the 95 % interval,
   and how many requests the full run sent (it must be ``records - sample``).

One JSON line per phase, then a summary line. Results go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _emulator

OUT = Path(__file__).parent / "out"
AGAC = [sys.executable, "-m", "agac.cli.main"]
BATCH_SECONDS = 3600
WORKFLOW = """\
name: pilot_bench
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, max_tokens: 64, run_mode: batch}
actions:
  - name: classify
    system: "You label product reviews."
    prompt: "Classify this review: {{ source.text }}"
    schema:
      type: object
      properties:
        sentiment: {type: string, enum: [pos, neg, neutral]}
        score: {type: integer, minimum: 0, maximum: 10}
      required: [sentiment, score]
      additionalProperties: false
"""
SENTENCES = (
    "The blender is loud.",
    "It crushes ice in seconds and the jug is easy to clean.",
    "Customer service never answered my two emails about the cracked lid.",
    "Great value.",
    "After a month the motor smells hot whenever I make soup, which worries me.",
)


def review(i: int) -> str:
    n = 1 + (i * 7919) % 12
    return f"Review {i}: " + " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(n))


def make_project(records: int) -> Path:
    root = OUT / f"pilot-{records}"
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "agac.yml").write_text("")
    (root / "wf.yml").write_text(WORKFLOW)
    with (root / "data" / "reviews.jsonl").open("w") as out:
        out.writelines(
            json.dumps({"id": f"r{i:06d}", "text": review(i)}) + "\n" for i in range(records)
        )
    return root


def agac(root: Path, args: list[str], env: dict[str, str], expect: int) -> tuple[Any, float]:
    """One agac command's ``--json`` document and its wall seconds."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        AGAC + args, cwd=root, env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - t0
    if proc.returncode != expect:
        raise SystemExit(
            f"agac {' '.join(args)} exited {proc.returncode}, expected {expect}:\n"
            f"{proc.stderr[-3000:]}"
        )
    return json.loads(proc.stdout), wall


def bench(args: argparse.Namespace) -> None:
    from agac.emulator.env import variables

    root = make_project(args.records)
    env = {**os.environ, **variables(args.port)}
    emulator = _emulator.start_emulator(args.port, batch_seconds=BATCH_SECONDS)
    try:
        report, pilot_s = agac(
            root,
            ["pilot", "wf.yml", "--sample", str(args.sample), "--seed", str(args.seed), "--json"],
            env,
            0,
        )
        batch = report["projection"]["batch"]
        print(json.dumps({"phase": "pilot", "wall_s": round(pilot_s, 3), "batch": batch}))
        submitted, submit_s = agac(root, ["run", "wf.yml", "--json"], env, 75)
        _emulator.control(args.port, "POST", "/_emulator/clock", {"advance": 2 * BATCH_SECONDS})
        full, collect_s = agac(root, ["run", "wf.yml", "--json"], env, 0)
        counts = full["actions"]["classify"]
        print(
            json.dumps(
                {
                    "phase": "full run",
                    "submit_s": round(submit_s, 3),
                    "collect_s": round(collect_s, 3),
                    "answered": counts["answered"],
                    "sent": counts["calls"],
                    "reused": counts["reused"],
                    "cost_usd": full["cost_usd"],
                }
            )
        )
        del submitted
        measured = full["cost_usd"] + batch["sample_usd"]
        error = (batch["estimate_usd"] - measured) / measured
        print(
            json.dumps(
                {
                    "records": args.records,
                    "sample": args.sample,
                    "projected_batch_usd": batch["estimate_usd"],
                    "interval_usd": [batch["low_usd"], batch["high_usd"]],
                    "measured_batch_usd": round(measured, 6),
                    "error_pct": round(100 * error, 2),
                    "inside_interval": batch["low_usd"] <= measured <= batch["high_usd"],
                    "after_pilot_projected_usd": batch["after_pilot_usd"],
                    "after_pilot_measured_usd": full["cost_usd"],
                    "full_run_sent": counts["calls"],
                    "expected_sent": args.records - args.sample,
                }
            )
        )
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=18768)
    bench(parser.parse_args())


if __name__ == "__main__":
    main()
