"""Issue 23 benchmarks: lake inputs in, results out.

Usage:
  python bench/lake_inputs.py snapshot [--rows 2000000] [--columns 50] [--objects 20]
  python bench/lake_inputs.py export [--records 1000000] [--reuse]

**snapshot** writes ``bench/out/lake/wide.parquet`` (``--rows`` rows, ``--columns``
columns: ``id`` plus text and integer columns, 100,000-row row groups, zstd) and the same
rows as ``--objects`` parquet objects, then measures — each in a child process reaped with
``os.wait4`` so wall, CPU and peak RSS are its own — the run's input snapshot
(:func:`agac.engine.lifecycle.snapshots.snapshot_input` into a fresh SQLite store):

1. ``projected``: the local file, a workflow reading 2 columns (``c01``, ``c02``) plus
   ``id_field`` — target ≥ 250,000 records/s, peak RSS ≤ 400 MB;
2. ``all-columns``: the same file, a workflow whose context observes ``source.*``;
3. ``s3-projected``: the 20 objects on moto's S3 server on loopback (started here), the
   projected workflow — target within 1.5× of (1);
4. ``read-only``: (1)'s reading alone (records out of the reader, nothing stored), to
   separate the reader from the store's inserts.

**export** builds (or with ``--reuse`` keeps) ``bench/out/lake-export-<records>/``: one
JSONL file of ``--records`` reviews and a one-action workflow on the mock provider, run to
the end; then, in a child process, ``agac export lake_export --all-actions --format parquet
--out s3://…/wide.parquet`` to moto — target peak RSS ≤ 400 MB — and reads the object back.

Prints one JSON line per measurement. ``maxrss_mb`` is ``ru_maxrss`` from ``wait4``, which on
Linux also counts the pages the parent had when it forked the child (moto's objects, the
generated data); ``peak_rss_mb`` is the child's own peak (``VmHWM``), the figure to read.
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
BUCKET = "agac-bench"
ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}
PROJECTED = """\
name: lake
input: {{path: '{path}', id_field: id}}
actions:
  - name: ask
    model: mock/m
    prompt: "Compare {{{{ source.c01 }}}} with {{{{ source.c02 }}}}"
"""
EVERYTHING = """\
name: lake
input: {{path: '{path}', id_field: id}}
actions:
  - name: ask
    model: mock/m
    context: {{observe: [source.*]}}
    prompt: "Compare {{{{ source.c01 }}}} with {{{{ source.c02 }}}}"
"""


def _batch(lo: int, hi: int, columns: int) -> Any:
    import pyarrow as pa

    data: dict[str, Any] = {"id": pa.array([f"r{i:08d}" for i in range(lo, hi)])}
    for j in range(1, columns):
        if j % 2:
            data[f"c{j:02d}"] = pa.array([f"value {i % 9973} of column {j}" for i in range(lo, hi)])
        else:
            data[f"c{j:02d}"] = pa.array([(i * j) % 100_003 for i in range(lo, hi)], pa.int64())
    return pa.table(data)


def make_data(root: Path, rows: int, columns: int, objects: int) -> None:
    import pyarrow.parquet as pq

    root.mkdir(parents=True, exist_ok=True)
    wide, parts = root / "wide.parquet", root / "parts"
    if wide.exists() and parts.exists() and len(list(parts.iterdir())) == objects:
        return
    parts.mkdir(exist_ok=True)
    per_object = -(-rows // objects)
    step = 100_000
    with pq.ParquetWriter(wide, _batch(0, 1, columns).schema, compression="zstd") as writer:
        for obj in range(objects):
            lo, hi = obj * per_object, min(rows, (obj + 1) * per_object)
            with pq.ParquetWriter(
                parts / f"part-{obj:03d}.parquet", _batch(0, 1, columns).schema, compression="zstd"
            ) as part:
                for start in range(lo, hi, step):
                    table = _batch(start, min(hi, start + step), columns)
                    writer.write_table(table, row_group_size=step)
                    part.write_table(table, row_group_size=step)


def project(root: Path, path: str, text: str, options: str = "") -> Path:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "agac.yml").write_text(options)
    (root / "wf.yml").write_text(text.format(path=path))
    return root


def _spawn_measured(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> dict[str, Any]:
    t0 = time.perf_counter()
    with open(OUT / "child.out", "w") as out, open(OUT / "child.err", "w") as err:
        proc = subprocess.Popen(
            args, cwd=cwd, stdout=out, stderr=err, env={**os.environ, **(env or {})}
        )
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(
            f"{' '.join(args)} exited {code}:\n{(OUT / 'child.err').read_text()[-3000:]}"
        )
    text = (OUT / "child.out").read_text().strip()
    try:
        result = json.loads(text) if text.startswith("{") else {}
    except json.JSONDecodeError:
        result = json.loads(text.splitlines()[-1])
    result = {k: v for k, v in result.items() if not isinstance(v, dict | list)}
    result.update(
        wall_s=round(time.perf_counter() - t0, 2),
        cpu_s=round(usage.ru_utime + usage.ru_stime, 2),
        maxrss_mb=round(usage.ru_maxrss / 1024, 1),
    )
    return result


def snapshot_child(root: str, read_only: bool) -> None:
    """In the child: snapshot the project's input into a fresh SQLite store (or only read
    it), print records and records/s."""
    from agac.config.project import find_project
    from agac.config.workflow import load_workflow
    from agac.engine.lifecycle.snapshots import input_source, snapshot_input
    from agac.store.factory import open_store

    proj = find_project(Path(root))
    workflow = load_workflow("wf.yml", proj)
    t0 = time.perf_counter()
    if read_only:
        count = sum(1 for _ in input_source(workflow, proj).records(workflow.input.id_field))
    else:
        db = Path(root) / ".agac" / "bench.db"
        db.parent.mkdir(exist_ok=True)
        store = open_store(f"sqlite:///{db}")
        count = snapshot_input(workflow, proj, store, tenant="default").count
    seconds = time.perf_counter() - t0
    cpu = time.process_time()
    print(
        json.dumps(
            {
                "records": count,
                "snapshot_s": round(seconds, 2),
                "records_per_s": round(count / seconds),
                "process_cpu_s": round(cpu, 2),
                "peak_rss_mb": own_peak_rss_mb(),
            }
        )
    )


def own_peak_rss_mb() -> float:
    """This process's own peak RSS (VmHWM of its address space). ``ru_maxrss`` of a child
    also counts the parent's pages at fork, so a parent holding moto's objects or the
    generated data would inflate it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return -1.0


PEAK_WRAPPER = (
    "import atexit, sys, runpy\n"
    "out = sys.argv[1]\n"
    "atexit.register(lambda: open(out, 'w').write([l for l in open('/proc/self/status') "
    "if l.startswith('VmHWM:')][0].split()[1]))\n"
    "sys.argv = ['agac', *sys.argv[2:]]\n"
    "runpy.run_module('agac.cli.main', run_name='__main__')\n"
)


def moto() -> tuple[Any, str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        region_name="us-east-1",
    )


def run_snapshot(args: argparse.Namespace) -> None:
    data = OUT / "lake"
    make_data(data, args.rows, args.columns, args.objects)
    me = [sys.executable, __file__, "child-snapshot"]
    wide = str(data / "wide.parquet")
    results = {}
    for name, text, read_only in (
        ("projected", PROJECTED, False),
        ("read-only", PROJECTED, True),
        ("all-columns", EVERYTHING, False),
    ):
        root = project(OUT / f"lake-{name}", wide, text)
        results[name] = _spawn_measured([*me, str(root), "1" if read_only else "0"])
        print(json.dumps({"measure": name, **results[name]}), flush=True)
    server, endpoint = moto()
    try:
        client = s3_client(endpoint)
        client.create_bucket(Bucket=BUCKET)
        for part in sorted((data / "parts").iterdir()):
            client.upload_file(str(part), BUCKET, f"lake/{part.name}")
        root = project(OUT / "lake-s3", f"s3://{BUCKET}/lake/", PROJECTED)
        env = {**ENV, "AWS_ENDPOINT_URL": endpoint}
        results["s3"] = _spawn_measured([*me, str(root), "0"], env=env)
        ratio = results["s3"]["snapshot_s"] / results["projected"]["snapshot_s"]
        print(
            json.dumps({"measure": "s3-projected", **results["s3"], "vs_local": round(ratio, 2)}),
            flush=True,
        )
    finally:
        server.stop()


EXPORT_WORKFLOW = """\
name: lake_export
input: {path: data/, id_field: id}
defaults: {model: mock/bench, max_tokens: 64, max_concurrency: 64}
actions:
  - name: classify
    prompt: "Classify this review: {{ source.text }}"
    schema:
      type: object
      properties:
        sentiment: {type: string, enum: [pos, neg, neutral]}
        score: {type: integer, minimum: 0, maximum: 10}
      required: [sentiment, score]
"""


def run_export(args: argparse.Namespace) -> None:
    root = OUT / f"lake-export-{args.records}"
    if not (args.reuse and (root / ".agac" / "agac.db").exists()):
        if root.exists():
            shutil.rmtree(root)
        (root / "data").mkdir(parents=True)
        (root / "agac.yml").write_text("")
        (root / "wf.yml").write_text(EXPORT_WORKFLOW)
        with (root / "data" / "reviews.jsonl").open("w") as out:
            for i in range(args.records):
                out.write(
                    json.dumps(
                        {
                            "id": f"r{i:07d}",
                            "text": f"Review {i}: the blender "
                            f"number {i % 97} is {'great' if i % 3 else 'loud'}.",
                        }
                    )
                    + "\n"
                )
        made = _spawn_measured([*AGAC, "run", "wf.yml", "--json"], cwd=root)
        print(
            json.dumps(
                {"measure": "run", **{k: made[k] for k in ("wall_s", "cpu_s", "maxrss_mb")}}
            ),
            flush=True,
        )
    server, endpoint = moto()
    try:
        client = s3_client(endpoint)
        client.create_bucket(Bucket=BUCKET)
        env = {**ENV, "AWS_ENDPOINT_URL": endpoint}
        url = f"s3://{BUCKET}/results/wide.parquet"
        peak = OUT / "export-peak.txt"
        done = _spawn_measured(
            [
                sys.executable,
                "-c",
                PEAK_WRAPPER,
                str(peak),
                "export",
                "lake_export",
                "--all-actions",
                "--format",
                "parquet",
                "--out",
                url,
                "--json",
            ],
            env=env,
            cwd=root,
        )
        done["peak_rss_mb"] = round(int(peak.read_text()) / 1024, 1)
        body = client.get_object(Bucket=BUCKET, Key="results/wide.parquet")["Body"].read()
        import io

        import pyarrow.parquet as pq

        meta = pq.ParquetFile(io.BytesIO(body)).metadata
        print(
            json.dumps(
                {
                    "measure": "export-s3",
                    **done,
                    "object_mb": round(len(body) / 2**20, 1),
                    "object_rows": meta.num_rows,
                    "row_groups": meta.num_row_groups,
                }
            )
        )
    finally:
        server.stop()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child-snapshot":
        snapshot_child(sys.argv[2], sys.argv[3] == "1")
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    snap = sub.add_parser("snapshot")
    snap.add_argument("--rows", type=int, default=2_000_000)
    snap.add_argument("--columns", type=int, default=50)
    snap.add_argument("--objects", type=int, default=20)
    exp = sub.add_parser("export")
    exp.add_argument("--records", type=int, default=1_000_000)
    exp.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    (run_snapshot if args.what == "snapshot" else run_export)(args)


if __name__ == "__main__":
    main()
