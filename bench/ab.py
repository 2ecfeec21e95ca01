"""Interleaved A/B pairs of any benchmark in bench/: this checkout against another one.

Usage: python bench/ab.py --vs OTHER_PYTHON [--pairs 8] -- bench/online_mock.py chained

Runs the benchmark script (with its arguments) once with this interpreter ("after") and
once with ``OTHER_PYTHON`` ("before": the venv of another checkout, for example the commit
before a change, whose editable install then runs its own agac), pair by pair, the order
alternating between pairs so that neither side always runs first on a machine whose speed
drifts. Each run prints JSON lines; every numeric field of a line (keyed by its ``phase``
or ``case``) is collected, and the medians per side and their ratio (after / before) are
printed at the end. The same script file runs on both sides, so only agac differs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from typing import Any


def run(python: str, script: list[str]) -> dict[str, dict[str, float]]:
    proc = subprocess.run([python, *script], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(
            f"{python} {' '.join(script)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    out: dict[str, dict[str, float]] = {}
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            continue
        doc = json.loads(line)
        name = str(doc.get("phase") or doc.get("case") or len(out)).split(" (")[0]
        out[name] = {
            k: v for k, v in doc.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", required=True, metavar="OTHER_PYTHON")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("script", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    sides = {"after": sys.executable, "before": args.vs}
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"after": [], "before": []}
    for pair in range(args.pairs):
        for side in ("before", "after") if pair % 2 == 0 else ("after", "before"):
            result = run(sides[side], script)
            runs[side].append(result)
            print(json.dumps({"pair": pair, "side": side, **result}), flush=True)
    medians: dict[str, Any] = {}
    for name, fields in runs["after"][0].items():
        for key in fields:
            try:
                med = {s: statistics.median(r[name][key] for r in runs[s]) for s in runs}
            except KeyError:
                continue
            ratio = round(med["after"] / med["before"], 3) if med["before"] else None
            medians[f"{name}: {key}"] = {**med, "ratio": ratio}
    print(json.dumps({"pairs": args.pairs, "medians": medians}, indent=1), flush=True)


if __name__ == "__main__":
    main()
