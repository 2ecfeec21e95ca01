"""Issue 2 benchmarks: the online engine on the mock provider, SQLite store, whole-process wall.

Usage: python bench/online_mock.py [case ...]   (cases: chained, chained_pg, latency, latency20k, latency50k, rss, reuse, startup)

``chained_pg`` runs the chained case twice, on SQLite and then on PostgreSQL (a throwaway
server started by tests/pg.py — fsync and synchronous_commit off — with a fresh server
and database per run), and reports both and their ratio.
Each case builds a throwaway project under bench/out/, runs the real `agac` command in a
subprocess and prints one JSON line with its numbers. Results go to docs/performance.md (today) and bench/HISTORY.md.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "out"
AGAC = [sys.executable, "-m", "agac.cli.main"]

WORKFLOW = """
name: bench
input: {{path: data/}}
defaults: {{model: mock/bench, max_concurrency: {conc}}}
actions:
  - name: classify
    prompt: "Classify: {{{{ source.text }}}}"
    schema: {{type: object, properties: {{label: {{enum: [a, b, c]}}}}, required: [label]}}
  - name: summarize
    dependencies: [classify]
    prompt: "Summarize {{{{ source.text }}}} labelled {{{{ classify.label }}}}"
"""


def make_project(
    name: str, records: int, conc: int = 64, actions: int = 2, store: str | None = None
) -> Path:
    root = OUT / name
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "agac.yml").write_text(f"store: {store}\n" if store else "")
    text = WORKFLOW.format(conc=conc)
    if actions == 1:
        text = text[: text.index("  - name: summarize")]
    (root / "wf.yml").write_text(text)
    with (root / "data" / "records.jsonl").open("w") as f:
        for i in range(records):
            f.write(
                json.dumps({"id": i, "text": f"record {i} says something about product {i % 97}"})
                + "\n"
            )
    return root


def run_agac(root: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        AGAC + list(args),
        check=False,
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0,):
        raise SystemExit(
            f"agac {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 3),
        "maxrss_mb": round(after.ru_maxrss / 1024, 1),
        "stdout": proc.stdout,
    }


def case_chained() -> dict:
    root = make_project("chained", 10_000, conc=int(os.environ.get("BENCH_CONCURRENCY", "64")))
    r = run_agac(root, "run", "wf.yml", "--json")
    s = json.loads(r.pop("stdout"))
    n = sum(a["answered"] for a in s["actions"].values())
    return {
        "case": "10k records x 2 chained, mock 0 ms",
        **r,
        "record_actions": n,
        "per_s": round(n / r["wall_s"]),
        "calls": sum(a["calls"] for a in s["actions"].values()),
        "target": "<= 4 s",
    }


def case_chained_pg() -> dict:
    sys.path.insert(0, str(Path(__file__).parent.parent))
    from tests.pg import start_server

    lite = case_chained()
    server = start_server()
    try:
        root = make_project("chained_pg", 10_000, store=server.url)
        r = run_agac(root, "run", "wf.yml", "--json")
    finally:
        server.stop()
    s = json.loads(r.pop("stdout"))
    n = sum(a["answered"] for a in s["actions"].values())
    return {
        "case": "10k records x 2 chained, mock 0 ms, SQLite then PostgreSQL",
        "sqlite_wall_s": lite["wall_s"],
        "sqlite_cpu_s": lite["cpu_s"],
        "pg_wall_s": r["wall_s"],
        "pg_cpu_s": r["cpu_s"],
        "pg_maxrss_mb": r["maxrss_mb"],
        "pg_record_actions": n,
        "pg_over_sqlite_wall": round(r["wall_s"] / lite["wall_s"], 3),
        "target": "PostgreSQL within 1.5x of SQLite",
    }


def case_latency(records: int = 5_000) -> dict:
    root = make_project("latency", records, conc=64, actions=1)
    r = run_agac(root, "run", "wf.yml", "--json", env={"AGAC_MOCK_LATENCY_MS": "50"})
    s = json.loads(r.pop("stdout"))
    calls = sum(a["calls"] for a in s["actions"].values())
    bound = 64 / 0.05
    return {
        "case": f"{records} records x 1 action, mock 50 ms, max_concurrency 64",
        **r,
        "calls": calls,
        "calls_per_s": round(calls / r["wall_s"]),
        "bound_per_s": bound,
        "of_bound": round(calls / r["wall_s"] / bound, 3),
        "target": ">= 0.80 of bound",
    }


def case_rss() -> dict:
    root = make_project("rss", 200_000)
    r = run_agac(root, "run", "wf.yml", "--json")
    s = json.loads(r.pop("stdout"))
    return {
        "case": "200k records x 2, mock 0 ms",
        **r,
        "answered": sum(a["answered"] for a in s["actions"].values()),
        "target": "maxrss <= 300 MB",
    }


def case_reuse() -> dict:
    root = make_project("reuse", 100_000)
    first = run_agac(root, "run", "wf.yml", "--json")
    first.pop("stdout")
    r = run_agac(root, "run", "wf.yml", "--json")
    s = json.loads(r.pop("stdout"))
    return {
        "case": "100k records x 2, every answer reusable (second run)",
        **r,
        "first_run_wall_s": first["wall_s"],
        "calls": sum(a["calls"] for a in s["actions"].values()),
        "reused": sum(a["reused"] for a in s["actions"].values()),
        "target": "<= 5 s, 0 calls",
    }


def case_startup() -> dict:
    root = make_project("startup", 10)
    best_version = min(run_agac(root, "--version")["wall_s"] for _ in range(5))
    best_validate = min(run_agac(root, "validate", "wf.yml")["wall_s"] for _ in range(5))
    return {
        "case": "startup (best of 5)",
        "version_s": best_version,
        "validate_s": best_validate,
        "target": "<= 0.4 s each",
    }


CASES = {
    "chained": case_chained,
    "chained_pg": case_chained_pg,
    "latency": case_latency,
    "latency20k": lambda: case_latency(20_000),
    "latency50k": lambda: case_latency(50_000),
    "rss": case_rss,
    "reuse": case_reuse,
    "startup": case_startup,
}


def compile_sources() -> None:
    """Byte-compile agac's sources first, as installing a wheel does: an editable
    install (and PYTHONDONTWRITEBYTECODE=1) would otherwise compile every module of
    agac again at each start (~0.12 s here), which is not what users run."""
    import agac

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(agac.__file__).parent)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


if __name__ == "__main__":
    compile_sources()
    for name in sys.argv[1:] or list(CASES):
        print(json.dumps(CASES[name]()), flush=True)
