"""Issue 17 benchmark: the wide results table of a 1,000,000-record run exported to parquet.

Usage: python bench/export_parquet.py [--records 1000000] [--files 20] [--reuse]

1. **run** (skipped with ``--reuse`` when bench/out/export-<records>/ already holds the
   finished run): a fresh project with ``--files`` JSONL files of ``--records`` reviews in
   all, a workflow of two chained actions on the offline mock provider — ``classify``
   (a schema with an enum, an integer, a nested object with an array) and ``summarize``
   (free text) — run to the end with the real ``agac run wf.yml --json``.
2. **export**: ``agac export export_bench --format parquet --all-actions --out
   wide.parquet``, then the same with ``--include-source``; each a child process reaped
   with ``os.wait4``, so its wall time, CPU (user + system) and peak RSS (``ru_maxrss``)
   are its own. Target: peak RSS ≤ 400 MB.
3. **check**: the file is read back with pyarrow (rows, row groups, columns) and with
   DuckDB (``SELECT count(*), count("classify.sentiment") FROM read_parquet(...)``).

Prints one JSON line per step. Results go to docs/performance.md (today) and bench/HISTORY.md ("Parquet export").
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

OUT = Path(__file__).parent / "out"
AGAC = [sys.executable, "-m", "agac.cli.main"]
WORKFLOW = """\
name: export_bench
input: {path: data/}
defaults: {model: mock/bench, max_tokens: 64, max_concurrency: 64}
actions:
  - name: classify
    prompt: "Classify this review: {{ source.text }}"
    schema:
      type: object
      properties:
        sentiment: {type: string, enum: [pos, neg, neutral]}
        score: {type: integer, minimum: 0, maximum: 10}
        meta:
          type: object
          properties:
            lang: {type: string}
            tags: {type: array, items: {type: string}}
      required: [sentiment, score, meta]
  - name: summarize
    dependencies: [classify]
    prompt: "Summarize in five words ({{ classify.sentiment }}): {{ source.text }}"
"""


def make_project(root: Path, records: int, files: int) -> None:
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "agac.yml").write_text("")
    (root / "wf.yml").write_text(WORKFLOW)
    per_file = -(-records // files)
    for f in range(files):
        lo, hi = f * per_file, min(records, (f + 1) * per_file)
        with (root / "data" / f"reviews-{f:03d}.jsonl").open("w") as out:
            for i in range(lo, hi):
                out.write(
                    json.dumps(
                        {
                            "id": f"r{i:07d}",
                            "stars": i % 5 + 1,
                            "text": f"Review {i}: the blender number {i % 97} is "
                            f"{'great' if i % 3 else 'too loud'}.",
                        }
                    )
                    + "\n"
                )


def run_agac(root: Path, args: list[str], expect: int = 0) -> dict[str, Any]:
    """One agac command; its own wall, CPU and peak RSS (wait4 reaps only this child)."""
    t0 = time.perf_counter()
    with open(root / "stdout.txt", "w") as out, open(root / "stderr.txt", "w") as err:
        proc = subprocess.Popen(AGAC + args, cwd=root, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != expect:
        raise SystemExit(
            f"agac {' '.join(args)} exited {code}, expected {expect}:\n"
            f"{(root / 'stderr.txt').read_text()[-3000:]}"
        )
    return {
        "wall_s": round(time.perf_counter() - t0, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "maxrss_mb": round(usage.ru_maxrss / 1024, 1),
    }


def finished(root: Path) -> bool:
    if not (root / ".agac" / "agac.db").exists():
        return False
    proc = subprocess.run(
        [*AGAC, "status", "export_bench", "--json"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode == 0 and json.loads(proc.stdout).get("state") == "succeeded"


def check(path: Path, records: int) -> dict[str, Any]:
    import duckdb
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    con = duckdb.connect()
    rows, answered = con.execute(
        f"SELECT count(*), count(\"classify.sentiment\") FROM read_parquet('{path}')"
    ).fetchone()
    assert meta.num_rows == rows == records, (meta.num_rows, rows, records)
    return {
        "rows": meta.num_rows,
        "row_groups": meta.num_row_groups,
        "columns": meta.num_columns,
        "mb": round(path.stat().st_size / 2**20, 1),
        "duckdb_rows": rows,
        "duckdb_answered": answered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep bench/out/export-<records>/ when it holds the finished run",
    )
    args = parser.parse_args()
    root = OUT / f"export-{args.records}"
    if not (args.reuse and finished(root)):
        make_project(root, args.records, args.files)
        print(
            json.dumps(
                {
                    "step": "run",
                    "records": args.records,
                    **run_agac(root, ["run", "wf.yml", "--json"]),
                }
            ),
            flush=True,
        )
    for extra in ([], ["--include-source"]):
        out = root / ("wide-source.parquet" if extra else "wide.parquet")
        usage = run_agac(
            root,
            [
                "export",
                "export_bench",
                "--format",
                "parquet",
                "--all-actions",
                *extra,
                "--out",
                str(out),
            ],
        )
        print(
            json.dumps({"step": "export", "options": extra, **usage, **check(out, args.records)}),
            flush=True,
        )


if __name__ == "__main__":
    main()
