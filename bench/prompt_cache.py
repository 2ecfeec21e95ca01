"""Prompt caching's benchmark: what caching saves on a long shared prefix.

Usage:
  python bench/prompt_cache.py [--records 10000] [--prefix-tokens 3000] [--mode online|batch]
                               [--model anthropic/claude-sonnet-4-5] [--port 8765]

Builds ``bench/out/prompt-cache-<cache>/``: a policy document of about ``--prefix-tokens``
tokens (agac's estimate: four characters a token), ``--records`` short reviews, and a
one-action workflow whose ``context_prefix`` reads the policy and whose prompt holds the
review. The same workflow runs twice against the emulator (started here, the Anthropic
protocol, answers at once): with ``cache: auto`` and with ``cache: off``. For each it prints
one JSON line with the run's wall and CPU time and what ``agac cost --json`` says — cache
writes and reads, the cost, and what caching and batch saved — then one line comparing the
two costs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import _emulator

OUT = Path(__file__).parent / "out"
AGAC = _emulator.AGAC
WORKFLOW = """\
name: cached
input: {{path: data/reviews.jsonl, id_field: id}}
defaults: {{model: {model}, max_tokens: 200, run_mode: {mode}, max_concurrency: 32,
            cache: {cache}}}
actions:
  - name: label
    context_prefix: "{{{{ read('policy.md') }}}}"
    prompt: "Label this review as positive, negative or mixed: {{{{ source.text }}}}"
"""
SENTENCE = (
    "Reviews that mention delivery times, packaging or support staff are about "
    "service; reviews about taste, size or fit are about the product itself. "
)


def make_project(cache: str, args: argparse.Namespace) -> Path:
    root = OUT / f"prompt-cache-{cache}"
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "agac.yml").write_text("")
    (root / "wf.yml").write_text(WORKFLOW.format(model=args.model, mode=args.mode, cache=cache))
    policy, i = [], 0
    while sum(map(len, policy)) < 4 * args.prefix_tokens:
        policy.append(f"Rule {i}. {SENTENCE}")
        i += 1
    (root / "policy.md").write_text("\n".join(policy))
    with (root / "data" / "reviews.jsonl").open("w") as out:
        for n in range(args.records):
            out.write(
                json.dumps(
                    {
                        "id": f"r{n:06d}",
                        "text": f"Review {n}: arrived late but tastes fine, size {n % 7}.",
                    }
                )
                + "\n"
            )
    return root


def run_agac(
    root: Path, args: list[str], env: dict[str, str], expect: tuple[int, ...]
) -> tuple[dict[str, Any], float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        AGAC + args, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in expect:
        raise SystemExit(f"agac {' '.join(args)} exited {code}:\n{out[-2000:]}\n{err[-2000:]}")
    return json.loads(out[out.find("{") :]), wall, usage.ru_utime + usage.ru_stime


def measure(cache: str, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    root = make_project(cache, args)
    wall = cpu = 0.0
    run: dict[str, Any] = {}
    for _ in range(200):  # batch: run until collected (the emulator ends batches quickly)
        run, w, c = run_agac(root, ["run", "wf.yml", "--json"], env, (0, 75))
        wall, cpu = wall + w, cpu + c
        if run.get("state") == "succeeded":
            break
        time.sleep(0.5)
    cost, _, _ = run_agac(root, ["cost", run["run_id"], "--json"], env, (0,))
    rows = cost["rows"]
    return {
        "cache": cache,
        "mode": args.mode,
        "records": args.records,
        "prefix_tokens": args.prefix_tokens,
        "model": args.model,
        "state": run.get("state"),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "calls": sum(r["calls"] for r in rows),
        "input_tokens": sum(r["input_tokens"] for r in rows),
        "cache_write_tokens": sum(r["cache_write_tokens"] for r in rows),
        "cached_tokens": sum(r["cached_tokens"] for r in rows),
        "output_tokens": sum(r["output_tokens"] for r in rows),
        "cost_usd": cost["cost_usd"],
        "batch_saved_usd": cost.get("batch_saved_usd"),
        "cache_saved_usd": cost.get("cache_saved_usd"),
        "load": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--prefix-tokens", type=int, default=3000)
    parser.add_argument("--mode", choices=("online", "batch"), default="online")
    parser.add_argument("--model", default="anthropic/claude-sonnet-4-5")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    from agac.emulator.env import variables

    env = {**os.environ, **variables(args.port)}
    emulator = _emulator.start_emulator(args.port, batch_seconds=1)
    try:
        on = measure("auto", args, env)
        print(json.dumps(on), flush=True)
        off = measure("off", args, env)
        print(json.dumps(off), flush=True)
        print(
            json.dumps(
                {
                    "compare": f"cache auto vs off, {args.mode}",
                    "cost_auto_usd": on["cost_usd"],
                    "cost_off_usd": off["cost_usd"],
                    "saved_usd": round(off["cost_usd"] - on["cost_usd"], 6),
                    "auto_over_off": round(on["cost_usd"] / off["cost_usd"], 4)
                    if off["cost_usd"]
                    else None,
                }
            ),
            flush=True,
        )
    finally:
        emulator.terminate()
        emulator.wait()


if __name__ == "__main__":
    main()
