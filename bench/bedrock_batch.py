"""Issue "Providers, part 3": a 120,000-record Bedrock batch through ``agac run``, offline.

Usage: python bench/bedrock_batch.py [--records 120000] [--partial 45000]
                                     [--port 18791] [--s3-port 18792]

One fresh project under bench/out/bedrock-<records>/ with a one-action workflow
(``model: bedrock/anthropic.claude-3-5-haiku-20241022-v1:0``, ``run_mode: batch``, a JSON
schema) over one JSONL file of ``--records`` records. Three processes besides this one,
each on 127.0.0.1 only: moto's S3 server (the user's bucket), ``agac emulator`` (Bedrock's
invocation-job API; its jobs read and write that S3 through boto3) and each ``agac``
command, with fake AWS keys, a region and ``AWS_EC2_METADATA_DISABLED=true`` so that
nothing looks for a real cloud. Each ``agac`` process is reaped with ``os.wait4``, so its
wall time, CPU (user + system) and peak RSS are its own.

The file is split by Bedrock's default quotas (at most 50,000 records a job, at least
100): 50,000, 50,000 and 20,000 records. The second job ends ``PartiallyCompleted`` with
``--partial`` records processed (an emulator fault).

1. **submit**: ``agac run`` until it exits 75 — three jobs out.
2. The emulator's clock moves two hours: every job has ended.
3. **collect**: ``agac run`` reads the three outputs by ``recordId`` and sends the records
   the partial job did not process in a retry job (B6), then exits 75.
4. The clock moves again. **finish**: ``agac run`` reads the retry job and exits 0.

Then it checks, and fails loudly otherwise: every record accounted for (answered plus
failed with a reason = ``--records``, nothing failed here), the emulator answered each
record once (``duplicate_answers: 0``), four jobs were created and no live call made, no
job below the minimum or above the maximum, every input object deleted, and the ledger's
calls and tokens equal to what the jobs' manifests in S3 say Bedrock billed. Prints one
JSON line per phase and one for the checks. Results go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _emulator

OUT = Path(__file__).parent / "out"
AGAC = [sys.executable, "-m", "agac.cli.main"]
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
BUCKET = "agac-bench"
ROLE = "arn:aws:iam::123456789012:role/agac-batch"
HOURS = 2 * 3600
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
WORKFLOW = f"""\
name: bedrock_bench
input: {{path: data/, id_field: id}}
defaults: {{model: bedrock/{MODEL}, max_tokens: 64, run_mode: batch}}
actions:
  - name: classify
    system: "You label product reviews."
    prompt: "Classify this review: {{{{ source.text }}}}"
    schema:
      type: object
      properties:
        sentiment: {{type: string, enum: [pos, neg, neutral]}}
      required: [sentiment]
      additionalProperties: false
"""


def make_project(records: int) -> Path:
    root = OUT / f"bedrock-{records}"
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    settings = {"batch_bucket": f"s3://{BUCKET}/jobs", "role_arn": ROLE}
    (root / "agac.yml").write_text("providers:\n  bedrock: " + json.dumps(settings) + "\n")
    (root / "wf.yml").write_text(WORKFLOW)
    with (root / "data" / "reviews.jsonl").open("w") as out:
        out.writelines(
            json.dumps({"id": f"r{i:06d}", "text": f"Review {i}: the kettle {i % 89} is fine."})
            + "\n"
            for i in range(records)
        )
    return root


def start_s3(port: int) -> tuple[subprocess.Popen[bytes], str]:
    """moto's S3 server on loopback, once it answers; its endpoint URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("moto's S3 server did not start")


def run_agac(root: Path, args: list[str], env: dict[str, str], expect: int) -> dict[str, Any]:
    """One agac command; its own wall, CPU and peak RSS (wait4 reaps only this child)."""
    t0 = time.perf_counter()
    with open(root / "stdout.txt", "w") as out, open(root / "stderr.txt", "w") as err:
        proc = subprocess.Popen(AGAC + args, cwd=root, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if code != expect:
        raise SystemExit(
            f"agac {' '.join(args)} exited {code}, expected {expect}:\n"
            f"{(root / 'stderr.txt').read_text()[-3000:]}"
        )
    stdout = (root / "stdout.txt").read_text()
    start = stdout.find("{")
    return {
        "exit": code,
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "maxrss_mb": round(usage.ru_maxrss / 1024, 1),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "summary": json.JSONDecoder().raw_decode(stdout[start:])[0] if start >= 0 else None,
    }


def _objects(s3: Any, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys += [str(o["Key"]) for o in page.get("Contents") or ()]
    return keys


def billed(s3: Any) -> dict[str, int]:
    """What the jobs' manifests say Bedrock processed and billed, summed over the jobs."""
    total = {"records": 0, "input_tokens": 0, "output_tokens": 0, "manifests": 0}
    for key in _objects(s3, "jobs/"):
        if key.endswith("manifest.json.out"):
            m = json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
            total["records"] += int(m["successRecordCount"])
            total["input_tokens"] += int(m["inputTokenCount"])
            total["output_tokens"] += int(m["outputTokenCount"])
            total["manifests"] += 1
    return total


def checks(
    root: Path, env: dict[str, str], port: int, s3: Any, records: int, last: dict[str, Any]
) -> dict[str, Any]:
    stats = _emulator.control(port, "GET", "/_emulator/stats")
    jobs = [b for b in stats["batches"] if b["provider"] == "bedrock"]
    ops = stats["requests"].get("bedrock", {})
    cost = json.loads(
        subprocess.run(
            AGAC + ["cost", "--json"], cwd=root, env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    rows = [r for r in cost["rows"] if r["provider"] == "bedrock"]
    ledger = {
        "calls": sum(r["calls"] for r in rows),
        "input_tokens": sum(r["input_tokens"] for r in rows),
        "output_tokens": sum(r["output_tokens"] for r in rows),
        "usd": round(sum(r["cost_usd"] for r in rows), 4),
        "batch_saved_usd": cost["batch_saved_usd"],
    }
    bill = billed(s3)
    action = last["summary"]["actions"]["classify"]
    inputs = [k for k in _objects(s3, "jobs/") if k.endswith("/input/records.jsonl")]
    out = {
        "phase": "checks",
        "jobs": sorted((j["requests"], j["status"]) for j in jobs),
        "answered": action["answered"],
        "failed": action["failed"],
        "accounted": action["answered"] + action["failed"],
        "emulator_answered": stats["answered"],
        "duplicate_answers": stats["duplicate_answers"],
        "creates": ops.get("batch.create", 0),
        "live_calls": ops.get("chat", 0),
        "input_objects_left": len(inputs),
        "ledger": ledger,
        "manifests": bill,
    }
    problems = [
        what
        for what, ok in [
            ("every record accounted for", out["accounted"] == records),
            ("nothing failed", action["failed"] == 0),
            ("each record answered once", stats["answered"] == records),
            ("no duplicate answer", stats["duplicate_answers"] == 0),
            ("four jobs, no live call", out["creates"] == 4 and out["live_calls"] == 0),
            ("jobs within 100..50,000", all(100 <= j["requests"] <= 50_000 for j in jobs)),
            ("input objects deleted", not inputs),
            ("ledger calls = billed records", ledger["calls"] == bill["records"] == records),
            ("ledger input tokens = billed", ledger["input_tokens"] == bill["input_tokens"]),
            ("ledger output tokens = billed", ledger["output_tokens"] == bill["output_tokens"]),
        ]
        if not ok
    ]
    out["problems"] = problems
    return out


def phase(name: str, result: dict[str, Any]) -> None:
    shown = {k: v for k, v in result.items() if k != "summary"}
    print(json.dumps({"phase": name, **shown}), flush=True)


def bench(args: argparse.Namespace) -> int:
    import boto3

    from agac.emulator.env import variables

    OUT.mkdir(exist_ok=True)
    root = make_project(args.records)
    moto, s3_url = start_s3(args.s3_port)
    # the emulator inherits this environment: its jobs reach moto's S3 as agac does
    os.environ.update({**AWS_ENV, "AWS_ENDPOINT_URL_S3": s3_url})
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    env = {**os.environ, **variables(args.port)}
    emulator = _emulator.start_emulator(args.port, batch_seconds=3600)
    try:
        s3 = boto3.client("s3", endpoint_url=s3_url)
        s3.create_bucket(Bucket=BUCKET)
        _emulator.control(
            args.port,
            "POST",
            "/_emulator/faults",
            {
                "rules": [
                    {
                        "provider": "bedrock",
                        "op": "batch.create",
                        "nth": 2,
                        "times": 1,
                        "fault": {"batch_end": "expired", "answered": args.partial},
                    }
                ]
            },
        )
        print(
            json.dumps({"case": f"{args.records:,} records, one file, bedrock/{MODEL}, batch"}),
            flush=True,
        )
        phase("submit", run_agac(root, ["run", "wf.yml", "--json"], env, 75))
        _emulator.control(args.port, "POST", "/_emulator/clock", {"advance": HOURS})
        phase("collect", run_agac(root, ["run", "wf.yml", "--json"], env, 75))
        _emulator.control(args.port, "POST", "/_emulator/clock", {"advance": HOURS})
        last = run_agac(root, ["run", "wf.yml", "--json"], env, 0)
        phase("finish", last)
        result = checks(root, env, args.port, s3, args.records, last)
        print(json.dumps(result), flush=True)
        return 1 if result["problems"] else 0
    finally:
        for proc in (emulator, moto):
            proc.terminate()
            proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=120_000)
    parser.add_argument("--partial", type=int, default=45_000)
    parser.add_argument("--port", type=int, default=18791)
    parser.add_argument("--s3-port", type=int, default=18792)
    sys.exit(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
