"""Issue 4 benchmarks: batch mode through the OpenAI adapter against a separate emulator.

Usage: python bench/batch.py [--records 50000] [--files 1] [--port 18767] [--profile]
                             [--no-ready] [--vs OTHER_PYTHON [--pairs 3]]

One case = one fresh project under bench/out/batch-<records>x<files>/ with a one-action
workflow (``model: openai/gpt-4o-mini``, ``run_mode: batch``, a JSON schema) over
``--files`` JSONL files of ``--records`` records in all. The emulator
(``agac emulator --batch-seconds 3600``) and every ``agac`` command run as separate
processes; each ``agac`` process is reaped with ``os.wait4`` so its wall time, CPU
(user + system) and peak RSS (``ru_maxrss``) are its own.

1. **submit**: ``agac run wf.yml --json`` until it exits 75 (paused, batches out). The
   split comes from the run's events (``agac events RUN --json``): start-up and input
   snapshot (process start → ``run_admitted``), lease and engine start (→ ``run_started``),
   the pass that stages every unit plus the upload of every batch (→ the last
   ``submitted``), the engine's second pass and first poll (→ the last ``awaiting``), exit.
2. The emulator's clock moves forward two hours, so every batch has ended, and each batch
   is asked for once so that the emulator answers its items before collect starts (a
   provider has done that work when it reports a batch ended; ``--no-ready`` leaves it
   inside the collect run).
3. **collect**: ``agac run wf.yml --json`` until it exits 0: polls, downloads and ingests
   every result, finalizes. Split from the events: start-up (→ ``run_started``), the
   engine's first pass over the pending units (→ the first ``awaiting``), download and
   ingest (→ the last ``collected``), the pass that settles every unit from its result
   and finalize (→ ``run_ended``).

Prints one JSON line per phase; the emulator's stats confirm the batch count and
``duplicate_answers: 0``. ``--profile`` runs both phases under py-spy instead (collapsed
stacks in bench/out/batch-<phase>.profile.txt; the timings are then py-spy's, not
agac's). ``--vs OTHER_PYTHON`` runs interleaved A/B pairs of the whole case against the
agac installed for another interpreter (another checkout's venv) and prints the medians.
Results go to docs/performance.md (today) and bench/HISTORY.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import _emulator

OUT = Path(__file__).parent / "out"
AGAC = [sys.executable, "-m", "agac.cli.main"]
PY_SPY = str(Path(sys.executable).parent / "py-spy")
BATCH_SECONDS = 3600
WORKFLOW = """\
name: batch_bench
input: {path: data/}
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


def review(i: int) -> str:
    return f"Review {i}: the blender number {i % 97} is {'great' if i % 3 else 'too loud'}."


def make_project(records: int, files: int) -> Path:
    root = OUT / f"batch-{records}x{files}"
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "agac.yml").write_text("")
    (root / "wf.yml").write_text(WORKFLOW)
    per_file = -(-records // files)
    for f in range(files):
        lo, hi = f * per_file, min(records, (f + 1) * per_file)
        with (root / "data" / f"reviews-{f:03d}.jsonl").open("w") as out:
            out.writelines(json.dumps({"id": i, "text": review(i)}) + "\n" for i in range(lo, hi))
    return root


# -- the emulator -----------------------------------------------------------------------------


def control(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 60,
) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"content-type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(req, timeout=timeout) as response:
        return json.loads(response.read() or b"{}")


def start_emulator(port: int) -> subprocess.Popen[bytes]:
    # a batch ends after an hour of emulator time, so no batch ends while a long submit
    # run is still sending (the first run must pause); the clock then moves past it
    return _emulator.start_emulator(port, batch_seconds=BATCH_SECONDS)


# -- agac as a measured child process -----------------------------------------------------------


def run_agac(
    root: Path, args: list[str], env: dict[str, str], expect: int, profile: Path | None = None
) -> dict[str, Any]:
    """Run one agac command; its own wall, CPU and peak RSS (wait4 reaps only this child)."""
    cmd = AGAC + args
    if profile is not None:
        cmd = [
            PY_SPY,
            "record",
            "--rate",
            "100",
            "--format",
            "raw",
            "--threads",
            "-o",
            str(profile),
            "--",
            *cmd,
        ]
    t0_epoch, t0 = time.time(), time.perf_counter()
    with open(root / "stdout.txt", "w") as out, open(root / "stderr.txt", "w") as err:
        proc = subprocess.Popen(cmd, cwd=root, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != expect and profile is None:  # py-spy exits 0 whatever agac did
        raise SystemExit(
            f"agac {' '.join(args)} exited {proc.returncode}, expected {expect}:\n"
            f"{(root / 'stderr.txt').read_text()[-3000:]}"
        )
    return {
        "exit": proc.returncode,
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "maxrss_mb": round(usage.ru_maxrss / 1024, 1),
        "t0": t0_epoch,
        "summary": summary_of((root / "stdout.txt").read_text()),
    }


def summary_of(stdout: str) -> Any:
    """The ``--json`` document in stdout (py-spy, when profiling, prints lines before it)."""
    start = stdout.find("{")
    return json.JSONDecoder().raw_decode(stdout[start:])[0] if start >= 0 else None


def events(root: Path, run_id: str, env: dict[str, str]) -> list[dict[str, Any]]:
    proc = subprocess.run(
        AGAC + ["events", run_id, "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout)


def last(evs: list[dict[str, Any]], kind: str, after: float) -> float | None:
    times = [e["created_at"] for e in evs if e["kind"] == kind and e["created_at"] >= after]
    return max(times) if times else None


def first(evs: list[dict[str, Any]], kind: str, after: float) -> float | None:
    times = [e["created_at"] for e in evs if e["kind"] == kind and e["created_at"] >= after]
    return min(times) if times else None


def split(marks: list[tuple[str, float | None]], t0: float, end: float) -> dict[str, float]:
    """Durations between consecutive event marks, from process start to process end."""
    out, prev = {}, t0
    for name, at in marks:
        if at is None:
            continue
        out[name] = round(at - prev, 3)
        prev = at
    out["rest_s"] = round(end - prev, 3)
    return out


# -- the case ---------------------------------------------------------------------------------


def bench(args: argparse.Namespace) -> None:
    from agac.emulator.env import variables

    OUT.mkdir(exist_ok=True)
    root = make_project(args.records, args.files)
    env = {**os.environ, **variables(args.port)}
    label = f"{args.records:,} records in {args.files} file(s), openai/gpt-4o-mini, batch"
    prof = (lambda phase: OUT / f"batch-{phase}.profile.txt") if args.profile else (lambda _: None)
    emulator = start_emulator(args.port)
    try:
        sub = run_agac(root, ["run", "wf.yml", "--json"], env, 75, prof("submit"))
        load = round(os.getloadavg()[0], 2)  # other work on the machine skews the numbers
        run_id = sub["summary"]["run_id"]
        stats = control(args.port, "GET", "/_emulator/stats")
        evs = events(root, run_id, env)
        t0 = sub["t0"]
        print(
            json.dumps(
                {
                    "case": label,
                    "phase": "submit (first run until exit 75)",
                    **{k: sub[k] for k in ("exit", "wall_s", "cpu_s", "maxrss_mb")},
                    "split": split(
                        [
                            ("startup_and_snapshot_s", first(evs, "run_admitted", t0)),
                            ("lease_and_start_s", first(evs, "run_started", t0)),
                            ("staging_and_upload_s", last(evs, "submitted", t0)),
                            ("second_pass_s", last(evs, "awaiting", t0)),
                        ],
                        t0,
                        t0 + sub["wall_s"],
                    ),
                    "loadavg_1m": load,
                    "batches_submitted": len(stats["batches"]),
                    "requests_in_batches": sum(b["requests"] for b in stats["batches"]),
                    "target": "<= 10 s, maxrss <= 300 MB (1M: <= 400 MB)",
                }
            ),
            flush=True,
        )

        control(args.port, "POST", "/_emulator/clock", {"advance": 2 * BATCH_SECONDS})
        warm = finish_batches(args.port, env, stats) if args.ready else None
        col = run_agac(root, ["run", "wf.yml", "--json"], env, 0, prof("collect"))
        load = round(os.getloadavg()[0], 2)
        evs = events(root, run_id, env)
        t0 = col["t0"]
        s = col["summary"]["actions"]["classify"]
        stats = control(args.port, "GET", "/_emulator/stats")
        print(
            json.dumps(
                {
                    "case": label,
                    "phase": "collect (after the clock moved, until exit 0)",
                    **{k: col[k] for k in ("exit", "wall_s", "cpu_s", "maxrss_mb")},
                    "split": split(
                        [
                            ("startup_s", first(evs, "run_started", t0)),
                            ("first_pass_s", first(evs, "awaiting", t0)),
                            ("download_and_ingest_s", last(evs, "collected", t0)),
                            ("settle_pass_and_finalize_s", last(evs, "run_ended", t0)),
                        ],
                        t0,
                        t0 + col["wall_s"],
                    ),
                    "loadavg_1m": load,
                    "state": col["summary"]["state"],
                    "answered": s["answered"],
                    "failed": s["failed"],
                    "cost_usd": col["summary"]["cost_usd"],
                    "duplicate_answers": stats["duplicate_answers"],
                    "db_mb": round((root / ".agac" / "agac.db").stat().st_size / 2**20, 1),
                    "provider_side_s": warm,
                    "target": "<= 10 s, maxrss <= 300 MB (1M: <= 400 MB)",
                }
            ),
            flush=True,
        )
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)


def finish_batches(port: int, env: dict[str, str], stats: dict[str, Any]) -> float:
    """Have the emulator end every batch and write its result file before collect starts.

    The emulator answers a batch's items when it is first asked about the batch after its
    time is up (a provider has done that work before it reports the batch ended). Asking
    once here, as a poll would, keeps that server-side work — 50,000 answers rendered by a
    process sharing agac's two cores — out of the collect run's time. Returns its seconds."""
    t0 = time.perf_counter()
    auth = {"authorization": f"Bearer {env['OPENAI_API_KEY']}"}
    for batch in stats["batches"]:
        # 1,000,000 answers take the emulator minutes on a loaded machine
        control(port, "GET", f"/v1/batches/{batch['id']}", headers=auth, timeout=3600)
    return round(time.perf_counter() - t0, 3)


def interleave(args: argparse.Namespace) -> None:
    """``--vs PYTHON``: pairs of the same case, this checkout's agac and the one installed
    for PYTHON (another checkout's venv), one after the other, the order alternating by
    pair; prints every run and then the medians and their ratio."""
    import statistics

    me = [
        sys.executable,
        __file__,
        "--records",
        str(args.records),
        "--files",
        str(args.files),
        "--port",
        str(args.port),
    ] + ([] if args.ready else ["--no-ready"])
    sides = {"after": me, "before": [args.vs, *me[1:]]}
    runs: dict[str, list[dict[str, Any]]] = {"after": [], "before": []}
    for pair in range(args.pairs):
        order = ["before", "after"] if pair % 2 == 0 else ["after", "before"]
        for side in order:
            proc = subprocess.run(sides[side], capture_output=True, text=True, check=True)
            lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
            row = {"pair": pair, "side": side}
            for line in lines:
                phase = line["phase"].split()[0]
                row[phase] = {k: line[k] for k in ("wall_s", "cpu_s", "maxrss_mb", "loadavg_1m")}
            runs[side].append(row)
            print(json.dumps(row), flush=True)
    out = {}
    for phase in ("submit", "collect"):
        for key in ("wall_s", "cpu_s", "maxrss_mb"):
            med = {s: statistics.median(r[phase][key] for r in runs[s]) for s in runs}
            out[f"{phase}_{key}"] = {**med, "ratio": round(med["after"] / med["before"], 3)}
    print(json.dumps({"pairs": args.pairs, "medians": out}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--files", type=int, default=1)
    parser.add_argument("--port", type=int, default=18767)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--no-ready",
        dest="ready",
        action="store_false",
        help="leave the emulator's end-of-batch work inside the collect run",
    )
    parser.add_argument(
        "--vs", metavar="PYTHON", help="interleave with the agac installed for PYTHON (A/B pairs)"
    )
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    interleave(args) if args.vs else bench(args)


if __name__ == "__main__":
    main()
