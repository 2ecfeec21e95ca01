"""Issue 16 benchmarks: online calls at wire speed, through real provider protocols.

Usage:
  python bench/online_wire.py run [--records 20000] [--concurrency 64] [--latency-ms 50]
                                  [--provider openai] [--transport lean|sdk] [--profile]
  python bench/online_wire.py cpu [--calls 3000] [--concurrency 64] [--latency-ms 50]
                                  [--providers openai,groq,anthropic,gemini,ollama]

Both start ``bench/wire_server.py`` (a minimal aiohttp server that answers every live-call
route with a fixed response after ``asyncio.sleep(latency)``) as its own process.

``run``: one llm action without a schema over ``--records`` records on a fresh SQLite
project (``providers: <p>: {base_url: <server>, transport: <t>}``), through the real
``agac run wf.yml --json`` in a child process, reaped with ``os.wait4`` so wall, CPU
(user + system) and peak RSS are that process's own. Reports the whole-process rate
(records / wall), the in-run rate (records / time from the run's ``run_started`` event
to its ``run_ended``), both as a share of the bound ``concurrency / latency``, and agac's
CPU per call. ``--profile`` records the run with py-spy (collapsed stacks in
bench/out/online_wire.profile.txt).

``cpu``: client CPU per call of each provider adapter on each transport, no engine: a
child process per (provider, transport) keeps ``--concurrency`` calls of
``adapter.complete`` in flight and measures ``time.process_time()`` over ``--calls``
calls after 200 warm-up calls.

Prints one JSON line per measurement; results go to docs/performance.md (today) and bench/HISTORY.md (every measurement).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
OUT = HERE / "out"
PROFILE = OUT / "online_wire.profile.txt"
AGAC = [sys.executable, "-m", "agac.cli.main"]
MODELS = {
    "openai": "gpt-4o-mini",
    "groq": "llama-3.3-70b-versatile",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "ollama": "llama3.2",
}
#: The base URL each adapter takes for the server's root (as its SDK expects it).
BASE_SUFFIX = {"openai": "/v1", "groq": "", "anthropic": "", "gemini": "", "ollama": ""}
KEYS = {
    "OPENAI_API_KEY": "x",
    "GROQ_API_KEY": "x",
    "ANTHROPIC_API_KEY": "x",
    "GEMINI_API_KEY": "x",
    "GOOGLE_API_KEY": "x",
}
WORKFLOW = """\
name: online_wire
input: {{path: data/}}
defaults: {{model: {provider}/{model}, max_concurrency: {concurrency}, max_tokens: 256}}
actions:
  - name: classify
    system: "You label product reviews."
    prompt: "Classify this review: {{{{ source.text }}}}"
"""


def review(i: int) -> str:
    return f"Review {i}: the blender number {i % 97} is {'great' if i % 3 else 'too loud'}."


# -- the server ---------------------------------------------------------------------------


def start_server(port: int, latency_ms: float) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "wire_server.py"),
            "--port",
            str(port),
            "--latency-ms",
            str(latency_ms),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            get(port, "/health")
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the benchmark server did not start")


def get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return json.loads(response.read())


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_1m": round(os.getloadavg()[0], 2),
    }


# -- run: the whole agac process ----------------------------------------------------------


def make_project(args: argparse.Namespace) -> Path:
    root = OUT / f"online_wire-{args.provider}-{args.transport}"
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    base = f"http://127.0.0.1:{args.port}{BASE_SUFFIX[args.provider]}"
    (root / "agac.yml").write_text(
        f"providers:\n  {args.provider}: {{base_url: '{base}', transport: {args.transport}}}\n"
    )
    (root / "wf.yml").write_text(
        WORKFLOW.format(
            provider=args.provider, model=MODELS[args.provider], concurrency=args.concurrency
        )
    )
    with (root / "data" / "reviews.jsonl").open("w") as out:
        for i in range(args.records):
            out.write(json.dumps({"id": i, "text": review(i)}) + "\n")
    return root


def case_run(args: argparse.Namespace) -> dict[str, Any]:
    root = make_project(args)
    env = {**os.environ, **KEYS}
    cmd = [*AGAC, "run", "wf.yml", "--json"]
    if args.profile:
        cmd = [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--rate",
            "200",
            "--format",
            "raw",
            "--threads",
            "-o",
            str(PROFILE),
            "--",
            *cmd,
        ]
    before = get(args.port, "/count")["answered"]
    measured, stdout = reaped_children(cmd, root, env)
    calls = get(args.port, "/count")["answered"] - before
    summary, _ = json.JSONDecoder().raw_decode(stdout[stdout.index("{") :])  # py-spy may add lines
    counts = summary["actions"]["classify"]
    assert summary["state"] == "succeeded" and counts["answered"] == args.records, summary
    _, text = reaped_children([*AGAC, "events", summary["run_id"], "--json"], root, env)
    log = json.loads(text)
    rows = log["events"] if isinstance(log, dict) else log
    started = next(e["created_at"] for e in rows if e["kind"] == "run_started")
    ended = next(e["created_at"] for e in reversed(rows) if e["kind"] == "run_ended")
    bound = args.concurrency / (args.latency_ms / 1000)
    whole = args.records / measured["wall_s"]
    in_run = args.records / (ended - started)
    return {
        "case": "run",
        "provider": args.provider,
        "transport": args.transport,
        "records": args.records,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "bound_per_s": round(bound, 1),
        "wall_s": round(measured["wall_s"], 3),
        "per_s": round(whole, 1),
        "of_bound": round(whole / bound, 3),
        "in_run_s": round(ended - started, 3),
        "in_run_per_s": round(in_run, 1),
        "in_run_of_bound": round(in_run / bound, 3),
        "cpu_s": round(measured["cpu_s"], 3),
        "cpu_ms_per_call": round(measured["cpu_s"] * 1000 / args.records, 3),
        "maxrss_mb": measured["maxrss_mb"],
        "server_calls": calls,
        **machine(),
    }


def reaped_children(cmd: list[str], cwd: Path, env: dict[str, str]) -> Any:
    """Run ``cmd`` to its end; (wall, CPU and peak RSS of that process alone, stdout)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    # Read the pipes in threads so the child never blocks on a full pipe; reap with wait4.
    chunks: dict[str, bytes] = {}

    def drain(name: str, pipe: Any) -> None:
        chunks[name] = pipe.read()

    import threading

    readers = [
        threading.Thread(target=drain, args=("out", proc.stdout)),
        threading.Thread(target=drain, args=("err", proc.stderr)),
    ]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    for reader in readers:
        reader.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n"
            f"{chunks.get('err', b'').decode()[-3000:]}"
        )
    measured = {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "maxrss_mb": round(usage.ru_maxrss / 1024, 1),
    }
    return measured, chunks.get("out", b"").decode()


# -- cpu: one adapter, no engine ----------------------------------------------------------


def client_cpu(
    provider: str, transport: str, port: int, calls: int, concurrency: int
) -> dict[str, Any]:
    """Runs in its own process: CPU per ``adapter.complete`` call."""
    from agac.providers.base import Message, ProviderSettings, Request
    from agac.providers.registry import provider_class

    settings = ProviderSettings(
        name=provider,
        api_key="x",
        base_url=f"http://127.0.0.1:{port}{BASE_SUFFIX[provider]}",
        transport=transport,  # type: ignore[arg-type]
        connections=concurrency,
    )
    adapter = provider_class(provider)(settings)
    model = MODELS[provider]

    def request(i: int) -> Request:
        return Request(
            provider,
            model,
            (
                Message("system", "You label product reviews."),
                Message("user", f"Classify this review: {review(i)}"),
            ),
            max_tokens=256,
        )

    async def drive(n: int) -> None:
        queue = list(range(n))

        async def worker() -> None:
            while queue:
                answer = await adapter.complete(request(queue.pop()))
                assert answer.text

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    async def main() -> tuple[float, float]:
        await drive(200)  # warm-up: connections opened, first-use imports done
        cpu0, t0 = time.process_time(), time.perf_counter()
        await drive(calls)
        measured = time.process_time() - cpu0, time.perf_counter() - t0
        await adapter.aclose()
        return measured

    cpu, wall = asyncio.run(main())
    return {
        "case": "cpu",
        "provider": provider,
        "transport": transport,
        "calls": calls,
        "concurrency": concurrency,
        "wall_s": round(wall, 3),
        "calls_per_s": round(calls / wall, 1),
        "cpu_ms_per_call": round(cpu * 1000 / calls, 3),
    }


def case_cpu(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for provider in args.providers.split(","):
        for transport in ("lean", "sdk"):
            cmd = [
                sys.executable,
                __file__,
                "client-cpu",
                "--provider",
                provider,
                "--transport",
                transport,
                "--port",
                str(args.port),
                "--calls",
                str(args.calls),
                "--concurrency",
                str(args.concurrency),
            ]
            proc = subprocess.run(
                cmd, capture_output=True, text=True, check=False, env={**os.environ, **KEYS}
            )
            if proc.returncode != 0:
                raise SystemExit(f"{provider}/{transport} failed:\n{proc.stderr[-3000:]}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            row.update(latency_ms=args.latency_ms, **machine())
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def compile_sources() -> None:
    """Byte-compile agac as an install does (this machine sets PYTHONDONTWRITEBYTECODE)."""
    import compileall

    import agac

    compileall.compile_dir(str(Path(agac.__file__).parent), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=["run", "cpu", "client-cpu"])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--provider", default="openai", choices=sorted(MODELS))
    parser.add_argument("--providers", default="openai,groq,anthropic,gemini,ollama")
    parser.add_argument("--transport", default="lean", choices=["lean", "sdk"])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--port", type=int, default=18780)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.case == "client-cpu":
        print(
            json.dumps(
                client_cpu(args.provider, args.transport, args.port, args.calls, args.concurrency)
            )
        )
        return
    OUT.mkdir(exist_ok=True)
    compile_sources()
    server = start_server(args.port, args.latency_ms)
    try:
        if args.case == "run":
            print(json.dumps(case_run(args)), flush=True)
        else:
            case_cpu(args)
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
