"""Issue 3 benchmark: online through the OpenAI adapter against the emulator.

Usage: python bench/openai_online.py [--records 2000] [--concurrency 64] [--latency-ms 200]
                                     [--port 18766] [--profile]

Starts ``agac emulator --latency-ms 200`` as a separate process (so the client's CPU is
measured alone), then runs two clients, each in its own process, against it:

- ``agac``: a one-action workflow (``model: openai/gpt-4o-mini``, a JSON schema,
  ``max_concurrency: 64``) over ``--records`` records, through ``agac.api.run`` on a
  fresh SQLite project — the whole engine: rendering, fingerprints, store, ledger;
- ``sdk``: the same requests as a plain loop of ``AsyncOpenAI`` calls, 64 in flight.

Each client reports wall time, calls/s against the bound concurrency / latency, and its
process CPU time per call (``time.process_time`` around the measured part, after
imports). The emulator's counters confirm every call arrived once. ``--profile`` also
records the agac client with py-spy (collapsed stacks in
bench/out/openai_online.profile.txt). Prints JSON lines;
results go to docs/performance.md (today) and bench/HISTORY.md (every measurement).
"""

from __future__ import annotations

import argparse
import asyncio
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
#: py-spy's collapsed stacks of the agac client (``--profile``), one line per stack.
PROFILE = OUT / "openai_online.profile.txt"
MODEL = "gpt-4o-mini"
SYSTEM = "You label product reviews."
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["pos", "neg", "neutral"]},
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
    },
    "required": ["sentiment", "score"],
    "additionalProperties": False,
}
WORKFLOW = """\
name: openai_online
input: {{path: data/}}
defaults: {{model: openai/{model}, max_concurrency: {concurrency}, max_tokens: 256}}
actions:
  - name: classify
    system: "{system}"
    prompt: "Classify this review: {{{{ source.text }}}}"
    schema: {schema}
"""


def review(i: int) -> str:
    return f"Review {i}: the blender number {i % 97} is {'great' if i % 3 else 'too loud'}."


# -- the emulator -----------------------------------------------------------------------------


def start_emulator(port: int, latency_ms: int) -> subprocess.Popen[bytes]:
    return _emulator.start_emulator(port, latency_ms=latency_ms)


def control(port: int, method: str, path: str) -> Any:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    with urllib.request.urlopen(req, timeout=10) as response:
        return json.loads(response.read() or b"{}")


# -- the clients (each runs in its own process) ------------------------------------------------


def client_agac(port: int, records: int, concurrency: int) -> dict[str, Any]:
    from agac import api
    from agac.emulator.env import variables

    os.environ.update(variables(port))
    root = OUT / "openai_online"
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "agac.yml").write_text("")
    (root / "wf.yml").write_text(
        WORKFLOW.format(
            model=MODEL, concurrency=concurrency, system=SYSTEM, schema=json.dumps(SCHEMA)
        )
    )
    with (root / "data" / "reviews.jsonl").open("w") as out:
        for i in range(records):
            out.write(json.dumps({"id": i, "text": review(i)}) + "\n")
    import openai  # noqa: F401

    import agac.engine.lifecycle.runs
    import agac.providers.openai  # noqa: F401

    cpu0, t0 = time.process_time(), time.perf_counter()
    result = api.run("wf.yml", root)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    summary = result.summary
    counts = summary["actions"]["classify"]
    assert summary["state"] == "succeeded", summary
    return {
        "client": "agac",
        "calls": counts["calls"],
        "answered": counts["answered"],
        "wall_s": wall,
        "cpu_s": cpu,
        "cost_usd": summary["cost_usd"],
    }


def client_sdk(port: int, records: int, concurrency: int) -> dict[str, Any]:
    import openai

    async def main() -> int:
        client = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0
        )
        queue = list(range(records))
        answered = 0

        async def worker() -> None:
            nonlocal answered
            while queue:
                i = queue.pop()
                completion = await client.chat.completions.create(
                    model=MODEL,
                    max_tokens=256,
                    messages=[
                        {"role": "system", "content": SYSTEM},
                        {"role": "user", "content": f"Classify this review: {review(i)}"},
                    ],
                    response_format={
                        "type": "json_schema",
                        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
                    },
                )
                json.loads(completion.choices[0].message.content or "null")
                answered += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        await client.close()
        return answered

    cpu0, t0 = time.process_time(), time.perf_counter()
    answered = asyncio.run(main())
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"client": "sdk", "calls": records, "answered": answered, "wall_s": wall, "cpu_s": cpu}


CLIENTS = {"agac": client_agac, "sdk": client_sdk}


def run_client(name: str, args: argparse.Namespace, profile: bool = False) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--client",
        name,
        "--port",
        str(args.port),
        "--records",
        str(args.records),
        "--concurrency",
        str(args.concurrency),
    ]
    if profile:
        cmd = [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--rate",
            "250",
            "--format",
            "raw",
            "--threads",
            "-o",
            str(PROFILE),
            "--",
            *cmd,
        ]
    control(args.port, "DELETE", "/_emulator/stats")
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"client {name} failed:\n{proc.stderr[-3000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    out: dict[str, Any] = json.loads(line)
    stats = control(args.port, "GET", "/_emulator/stats")
    bound = args.concurrency / (args.latency_ms / 1000)
    per_s = out["calls"] / out["wall_s"]
    out.update(
        {
            "latency_ms": args.latency_ms,
            "concurrency": args.concurrency,
            "calls_per_s": round(per_s, 1),
            "bound_per_s": round(bound, 1),
            "of_bound": round(per_s / bound, 3),
            "cpu_ms_per_call": round(out["cpu_s"] * 1000 / out["calls"], 3),
            "wall_s": round(out["wall_s"], 3),
            "cpu_s": round(out["cpu_s"], 3),
            "emulator_chat": stats["requests"].get("openai", {}).get("chat", 0),
            "duplicate_answers": stats["duplicate_answers"],
        }
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--port", type=int, default=18766)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--client", choices=sorted(CLIENTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        print(json.dumps(CLIENTS[args.client](args.port, args.records, args.concurrency)))
        return
    OUT.mkdir(exist_ok=True)
    emulator = start_emulator(args.port, args.latency_ms)
    try:
        for name in ("sdk", "agac"):
            print(json.dumps(run_client(name, args)), flush=True)
        if args.profile:
            print(
                json.dumps({"profile": str(PROFILE), **run_client("agac", args, profile=True)}),
                flush=True,
            )
    finally:
        emulator.terminate()
        emulator.wait(timeout=10)


if __name__ == "__main__":
    main()
