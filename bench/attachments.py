"""Issue 22 benchmarks: records that attach images, in batch and online, against the
emulator (``agac emulator``, a separate process) through the OpenAI protocol.

Usage:
  python bench/attachments.py batch [--records 5000] [--size 200000] [--port 18791]
  python bench/attachments.py online [--records 2000] [--size 50000] [--concurrency 64]
                                     [--latency-ms 50] [--port 18792]
  python bench/attachments.py spool [--records 2000] [--size 200000]

``batch``: a fresh project under bench/out/att-batch/ with ``--records`` records, each
attaching its own noise PNG of about ``--size`` bytes (incompressible, so its base64 is
4/3 of it); one llm action, ``model: openai/gpt-4o-mini``, ``run_mode: batch``. The
submit run (``agac run --json`` until it exits 75) is reaped with ``os.wait4``: its wall,
CPU and peak RSS are its own (it runs through bench/_spool_timer.py, which times each
batch file's writing and changes nothing else). Reported: the provider batches it took
(the 200 MB file limit with agac's 10 % margin), the base64 written into batch files and
its rate while the files are written, and over the span from ``run_started`` to the last
``submitted`` event (which also holds the staging pass, the check of every file against
its hash and the uploads, i.e. the emulator's parsing), and the store's growth
per record (``.agac/agac.db`` plus its WAL, after the submit, minus an empty store).
The emulator's clock is then moved past the batches' end and a collect run reads them:
every record must be answered.

``online``: ``--records`` records of ``--size`` bytes each, one online action, ``max_concurrency``
``--concurrency``, the emulator answering each call after ``--latency-ms``; the whole
process's rate (records / wall of ``agac run``) and the in-run rate (``run_started`` to
``run_ended``), as shares of the bound ``concurrency / latency``; ``--no-files`` is the
same run without attachments, the baseline on the same machine.

``spool``: the batch-file writer alone, in this process: ``--records`` stored requests
of one ``--size`` image each through the OpenAI adapter's line writer into a temporary
batch file; MB/s of base64 and the peak RSS growth (``ru_maxrss``) while it runs.

Prints one JSON line per measurement; figures go to bench/results/i22.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import _emulator

HERE = Path(__file__).parent
OUT = HERE / "out"
AGAC = [sys.executable, "-m", "agac.cli.main"]
BATCH_SECONDS = 3600
WORKFLOW = """\
name: att_bench
input: {{path: data/, id_field: id}}
defaults: {{model: openai/gpt-4o-mini, max_tokens: 64, run_mode: {mode},
            max_concurrency: {concurrency}, retry: {{max_attempts: 2}}}}
actions:
  - name: describe
    prompt: "Describe picture {{{{ source.id }}}}."
    attachments: ["{{{{ source.file }}}}"]
"""


def make_project(name: str, records: int, size: int, mode: str, concurrency: int) -> Path:
    from agac.samplefiles import png_of_size

    root = OUT / name
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "files").mkdir()
    (root / "agac.yml").write_text("")
    (root / "wf.yml").write_text(WORKFLOW.format(mode=mode, concurrency=concurrency))
    with (root / "data" / "pictures.jsonl").open("w") as out:
        for i in range(records):
            name_ = f"p{i:06d}.png"
            (root / "files" / name_).write_bytes(png_of_size(size, seed=i))
            out.write(json.dumps({"id": f"p{i:06d}", "file": f"files/{name_}"}) + "\n")
    return root


def control(port: int, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=600) as response:
        return json.loads(response.read() or b"{}")


def start_emulator(port: int, latency_ms: int = 0) -> subprocess.Popen[bytes]:
    return _emulator.start_emulator(
        port, batch_seconds=BATCH_SECONDS, latency_ms=latency_ms, wait=30
    )


def run_agac(
    root: Path, args: list[str], env: dict[str, str], expect: int, command: list[str] = AGAC
) -> dict[str, Any]:
    t0_epoch, t0 = time.time(), time.perf_counter()
    with open(root / "stdout.txt", "w") as out, open(root / "stderr.txt", "w") as err:
        proc = subprocess.Popen(command + args, cwd=root, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if code != expect:
        raise SystemExit(
            f"agac {' '.join(args)} exited {code}, expected {expect}:\n"
            f"{(root / 'stderr.txt').read_text()[-3000:]}"
        )
    text = (root / "stdout.txt").read_text()
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "maxrss_mb": round(usage.ru_maxrss / 1024, 1),
        "t0": t0_epoch,
        "summary": json.loads(text[text.find("{") :]),
    }


def events(root: Path, run_id: str, env: dict[str, str]) -> list[dict[str, Any]]:
    proc = subprocess.run(
        AGAC + ["events", run_id, "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    doc: list[dict[str, Any]] = json.loads(proc.stdout)
    return doc


def store_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / ".agac").glob("agac.db*"))


def empty_store_bytes(env: dict[str, str]) -> int:
    root = OUT / "att-empty"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "agac.yml").write_text("")
    subprocess.run(AGAC + ["store", "upgrade"], cwd=root, env=env, check=True, capture_output=True)
    return store_bytes(root)


def batch(args: argparse.Namespace) -> None:
    from agac.emulator.env import variables
    from agac.media import base64_size

    root = make_project("att-batch", args.records, args.size, "batch", 16)
    files = sorted((root / "files").iterdir())
    raw = sum(p.stat().st_size for p in files)
    b64 = sum(base64_size(p.stat().st_size) for p in files)
    spool_log = root / "spool.jsonl"
    env = {**os.environ, **variables(args.port), "AGAC_BENCH_SPOOL_LOG": str(spool_log)}
    emulator = start_emulator(args.port)
    try:
        base = empty_store_bytes(env)
        sub = run_agac(
            root,
            ["run", "wf.yml", "--json"],
            env,
            75,
            [sys.executable, str(HERE / "_spool_timer.py")],
        )
        spools = [json.loads(line) for line in spool_log.read_text().splitlines()]
        spooled_mb = sum(x["bytes"] for x in spools) / 1e6
        spool_s = sum(x["seconds"] for x in spools)
        grown = store_bytes(root) - base
        run_id = sub["summary"]["run_id"]
        evs = events(root, run_id, env)
        started = min(e["created_at"] for e in evs if e["kind"] == "run_started")
        submitted = [e["created_at"] for e in evs if e["kind"] == "submitted"]
        span = max(submitted) - started
        stats = control(args.port, "GET", "/_emulator/stats")
        print(
            json.dumps(
                {
                    "case": f"{args.records:,} records x {args.size:,} B PNG, openai batch, submit",
                    "wall_s": sub["wall_s"],
                    "cpu_s": sub["cpu_s"],
                    "maxrss_mb": sub["maxrss_mb"],
                    "batches": len(submitted),
                    "images_mb": round(raw / 1e6, 1),
                    "base64_mb": round(b64 / 1e6, 1),
                    "started_to_last_submitted_s": round(span, 2),
                    "base64_mb_per_s_started_to_submitted": round(b64 / 1e6 / span, 1),
                    "batch_files_mb": round(spooled_mb, 1),
                    "writing_batch_files_s": round(spool_s, 2),
                    "base64_mb_per_s_writing": round(b64 / 1e6 / spool_s, 1),
                    "store_growth_bytes_per_record": round(grown / args.records),
                    "emulator_batch_creates": _creates(stats),
                    "load": round(os.getloadavg()[0], 2),
                }
            ),
            flush=True,
        )
        control(args.port, "POST", "/_emulator/clock", {"advance": BATCH_SECONDS * 2})
        col = run_agac(root, ["run", "wf.yml", "--json"], env, 0)
        answered = col["summary"]["actions"]["describe"]["answered"]
        print(
            json.dumps(
                {
                    "case": "collect",
                    "wall_s": col["wall_s"],
                    "cpu_s": col["cpu_s"],
                    "maxrss_mb": col["maxrss_mb"],
                    "answered": answered,
                    "store_growth_bytes_per_record_after_collect": round(
                        (store_bytes(root) - base) / args.records
                    ),
                }
            ),
            flush=True,
        )
    finally:
        emulator.terminate()
        emulator.wait()


def _creates(stats: dict[str, Any]) -> int:
    return int((stats.get("requests") or {}).get("openai", {}).get("batch.create", 0))


def online(args: argparse.Namespace) -> None:
    from agac.emulator.env import variables

    root = make_project("att-online", args.records, args.size, "online", args.concurrency)
    if args.no_files:  # the baseline: the same run without attachments
        wf = root / "wf.yml"
        wf.write_text(
            "".join(line for line in wf.read_text().splitlines(True) if "attachments:" not in line)
        )
    env = {**os.environ, **variables(args.port)}
    emulator = start_emulator(args.port, args.latency_ms)
    try:
        got = run_agac(root, ["run", "wf.yml", "--json"], env, 0)
        evs = events(root, got["summary"]["run_id"], env)
        started = min(e["created_at"] for e in evs if e["kind"] == "run_started")
        ended = max(e["created_at"] for e in evs if e["kind"] == "run_ended")
        bound = args.concurrency / (args.latency_ms / 1000)
        whole = args.records / got["wall_s"]
        inrun = args.records / (ended - started)
        print(
            json.dumps(
                {
                    "case": f"{args.records:,} records x "
                    f"{'no file' if args.no_files else f'{args.size:,} B PNG'} online, "
                    f"{args.latency_ms} ms x {args.concurrency}",
                    "wall_s": got["wall_s"],
                    "cpu_s": got["cpu_s"],
                    "maxrss_mb": got["maxrss_mb"],
                    "bound_per_s": round(bound),
                    "whole_process_per_s": round(whole, 1),
                    "whole_process_share": round(whole / bound, 3),
                    "in_run_per_s": round(inrun, 1),
                    "in_run_share": round(inrun / bound, 3),
                    "answered": got["summary"]["actions"]["describe"]["answered"],
                    "cpu_ms_per_call": round(1000 * got["cpu_s"] / args.records, 3),
                    "load": round(os.getloadavg()[0], 2),
                }
            ),
            flush=True,
        )
    finally:
        emulator.terminate()
        emulator.wait()


def spool(args: argparse.Namespace) -> None:
    from agac.media import base64_size
    from agac.prompt.attachments import resolve
    from agac.providers._common import spool_jsonl
    from agac.providers.base import Message, ProviderSettings, Request, StoredRequests
    from agac.providers.openai import OpenAIProvider
    from agac.samplefiles import png_of_size

    root = OUT / "att-spool"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    data = png_of_size(args.size)
    pairs = []
    for i in range(args.records):
        path = root / f"p{i}.png"
        path.write_bytes(data[:-16] + i.to_bytes(16, "big"))  # distinct bytes, same size
        att = resolve(str(path), root)
        req = Request(
            "openai", "gpt-4o-mini", (Message("user", f"picture {i}", (att,)),), max_tokens=64
        )
        pairs.append((f"c{i}", req.canonical()))
    os.environ.setdefault("OPENAI_API_KEY", "x")
    adapter = OpenAIProvider(ProviderSettings(name="openai", transport="sdk"))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    spooled = spool_jsonl(
        adapter._stored_lines(StoredRequests(pairs).pairs),
        max_count=10**6,
        max_bytes=10**12,
        provider="openai",
    )
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    spooled.discard()
    b64 = args.records * base64_size(len(data))
    print(
        json.dumps(
            {
                "case": f"spool {args.records:,} lines x {args.size:,} B PNG",
                "seconds": round(took, 3),
                "base64_mb": round(b64 / 1e6, 1),
                "base64_mb_per_s": round(b64 / 1e6 / took, 1),
                "file_mb": round(spooled.size / 1e6, 1),
                "maxrss_growth_mb": round((after - before) / 1024, 1),
                "python": platform.python_version(),
            }
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    b = sub.add_parser("batch")
    b.add_argument("--records", type=int, default=5000)
    b.add_argument("--size", type=int, default=200_000)
    b.add_argument("--port", type=int, default=18791)
    o = sub.add_parser("online")
    o.add_argument("--records", type=int, default=2000)
    o.add_argument("--size", type=int, default=50_000)
    o.add_argument("--concurrency", type=int, default=64)
    o.add_argument("--latency-ms", type=int, default=50)
    o.add_argument("--port", type=int, default=18792)
    o.add_argument(
        "--no-files", action="store_true", help="the same run without attachments (the baseline)"
    )
    s = sub.add_parser("spool")
    s.add_argument("--records", type=int, default=2000)
    s.add_argument("--size", type=int, default=200_000)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    {"batch": batch, "online": online, "spool": spool}[args.what](args)


if __name__ == "__main__":
    main()
