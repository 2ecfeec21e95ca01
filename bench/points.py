"""Storage-point benchmarks (issue 15): a run on s3:// against moto's S3 server on loopback
next to the same run on SQLite, the restore of a 100 MB state, and the write rate counted
from the server's own request log.

Usage: python bench/points.py [chained [PAIRS]] [restore] [writes]

- chained: 10,000 records x 2 chained actions on the mock provider (0 ms), SQLite and
  s3:// run as interleaved pairs (SQLite first, then s3), whole-process wall and CPU;
  target: s3 within 2x of SQLite.
- restore: a state of ~100 MB at an s3:// point (and a dir:// point), restored on a fresh
  cache (a reading open); target <= 5 s.
- writes: during the chained run on s3://, requests that write (PUT, POST, DELETE) per
  second, from moto_server's request log; target <= 20.

moto_server runs as a subprocess on 127.0.0.1 (its log is its stderr); nothing leaves the
machine. Results go to docs/performance.md (today) and bench/HISTORY.md.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "out" / "points"
AGAC = [sys.executable, "-m", "agac.cli.main"]
BIN = Path(sys.executable).parent
AWS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}
BUCKET = "agac-bench"

WORKFLOW = """
name: bench
input: {path: data/}
defaults: {model: mock/bench, max_concurrency: 64}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
    schema: {type: object, properties: {label: {enum: [a, b, c]}}, required: [label]}
  - name: summarize
    dependencies: [classify]
    prompt: "Summarize {{ source.text }} labelled {{ classify.label }}"
"""
_LOG_LINE = re.compile(r'\[(\d\d/\w+/\d{4} \d\d:\d\d:\d\d)\] "(\w+) (\S+) HTTP')


class MotoServer:
    """``moto_server -H 127.0.0.1 -p PORT`` with its request log in a file."""

    def __init__(self, log: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.log = log
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("moto_server did not start") from None
                time.sleep(0.1)
        import boto3

        boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {**AWS, "AWS_ENDPOINT_URL": self.url}

    def requests(self) -> list[tuple[str, str, str]]:
        """(second, method, path) of every request logged so far."""
        self._out.flush()
        return [(m[1], m[2], m[3]) for m in _LOG_LINE.finditer(self.log.read_text())]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self._out.close()


def make_project(name: str, records: int, store: str) -> Path:
    root = OUT / name
    if root.exists():
        shutil.rmtree(root)
    (root / "data").mkdir(parents=True)
    (root / "agac.yml").write_text(f"store: {store}\n" if store else "")
    (root / "wf.yml").write_text(WORKFLOW)
    with (root / "data" / "records.jsonl").open("w") as f:
        for i in range(records):
            f.write(
                json.dumps({"id": i, "text": f"record {i} says something about product {i % 97}"})
                + "\n"
            )
    return root


def run_agac(root: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        AGAC + list(args),
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(
            f"agac {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 3),
        "summary": json.loads(proc.stdout),
    }


def writes_per_second(requests: list[tuple[str, str, str]]) -> dict[str, Any]:
    per: dict[str, int] = {}
    total = 0
    for second, method, _path in requests:
        if method in ("PUT", "POST", "DELETE"):
            per[second] = per.get(second, 0) + 1
            total += 1
    return {
        "writes": total,
        "max_writes_per_s": max(per.values(), default=0),
        "seconds_with_writes": len(per),
    }


def case_chained(pairs: int = 3) -> dict[str, Any]:
    moto = MotoServer(OUT / "moto-chained.log")
    rows = []
    try:
        for n in range(pairs):
            sqlite_root = make_project(f"sqlite-{n}", 10_000, "")
            s3_root = make_project(f"s3-{n}", 10_000, f"s3://{BUCKET}/chained-{n}")
            a = run_agac(sqlite_root, "run", "wf.yml", "--json")
            seen = len(moto.requests())
            b = run_agac(
                s3_root,
                "run",
                "wf.yml",
                "--json",
                env={**moto.env(), "XDG_CACHE_HOME": str(OUT / f"cache-{n}")},
            )
            assert b["summary"]["state"] == "succeeded", b["summary"]
            rates = writes_per_second(moto.requests()[seen:])
            rows.append(
                {
                    "sqlite_wall_s": a["wall_s"],
                    "sqlite_cpu_s": a["cpu_s"],
                    "s3_wall_s": b["wall_s"],
                    "s3_cpu_s": b["cpu_s"],
                    "ratio": round(b["wall_s"] / a["wall_s"], 2),
                    **rates,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        moto.stop()
    return {
        "case": "10k x 2 chained, mock 0 ms: sqlite vs s3:// (moto on loopback)",
        "pairs": rows,
        "median_sqlite_wall_s": statistics.median(r["sqlite_wall_s"] for r in rows),
        "median_s3_wall_s": statistics.median(r["s3_wall_s"] for r in rows),
        "median_ratio": statistics.median(r["ratio"] for r in rows),
        "max_writes_per_s": max(r["max_writes_per_s"] for r in rows),
        "target": "ratio <= 2; writes/s <= 20",
    }


def _build_state(url: str, cache: Path, megabytes: int) -> int:
    """A point whose state is about ``megabytes`` MB (rows of event data), closed: a
    snapshot holding it all. Returns the snapshot's size."""
    from agac.store.points.store import PointStore

    store = PointStore(url, environ={"XDG_CACHE_HOME": str(cache)})
    try:
        pad = "x" * 4000
        batch = 250
        for start in range(0, megabytes * 1024 * 1024 // 4100, batch):
            store.checkpoint(
                lease=None,
                events=[
                    {
                        "run_id": "bench",
                        "kind": "pad",
                        "action": None,
                        "unit_key": f"k{start + i}",
                        "data": json.dumps({"pad": pad}),
                        "created_at": time.time(),
                    }
                    for i in range(batch)
                ],
            )
    finally:
        store.close()
    assert store.replica is None
    from agac.store.points.head import Head
    from agac.store.points.objects import open_objects

    objects = open_objects(url)
    stored = objects.get("head")
    assert stored is not None
    head = Head.decode(stored.data, url)
    return (head.snapshot.size if head.snapshot else 0) + head.log_bytes


def _time_restore(url: str, cache: Path) -> dict[str, Any]:
    from agac.store.points.store import PointStore

    if cache.exists():
        shutil.rmtree(cache)
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    store = PointStore(url, writes=False, environ={"XDG_CACHE_HOME": str(cache)})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    rows = store.iter_events("bench", 0, limit=1)
    assert list(rows), "the restored state is empty"
    store.close()
    return {
        "restore_s": round(wall, 3),
        "cpu_s": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 3),
    }


def case_restore(megabytes: int = 100, repeats: int = 3) -> dict[str, Any]:
    out: dict[str, Any] = {
        "case": f"restore of a ~{megabytes} MB state on an empty cache",
        "target": "<= 5 s",
    }
    moto = MotoServer(OUT / "moto-restore.log")
    saved = dict(os.environ)
    try:
        os.environ.update(moto.env())
        for kind, url in (
            ("s3", f"s3://{BUCKET}/restore"),
            ("dir", f"dir://{(OUT / 'dirpoint').as_posix()}"),
        ):
            if kind == "dir" and (OUT / "dirpoint").exists():
                shutil.rmtree(OUT / "dirpoint")
            size = _build_state(url, OUT / f"cache-build-{kind}", megabytes)
            times = [_time_restore(url, OUT / f"cache-restore-{kind}") for _ in range(repeats)]
            out[kind] = {
                "state_bytes": size,
                "runs": times,
                "median_restore_s": statistics.median(t["restore_s"] for t in times),
            }
            print(json.dumps({kind: out[kind]}), flush=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        moto.stop()
    return out


def main(argv: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    cases = argv or ["chained", "restore"]
    i = 0
    while i < len(cases):
        name = cases[i]
        if name in ("chained", "writes"):
            pairs = int(cases[i + 1]) if i + 1 < len(cases) and cases[i + 1].isdigit() else 3
            i += 1 if i + 1 < len(cases) and cases[i + 1].isdigit() else 0
            print(json.dumps(case_chained(pairs)))
        elif name == "restore":
            print(json.dumps(case_restore()))
        else:
            raise SystemExit(f"unknown case {name!r}: chained [PAIRS], restore, writes")
        i += 1


if __name__ == "__main__":
    main(sys.argv[1:])
