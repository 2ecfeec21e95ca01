"""Issue 23 item 3: ``input.path: s3://…`` (a prefix or a glob) read through obstore against
moto's S3 server on loopback (which enforces If-Match), and ``gs://`` / ``az://`` through
obstore's local store on the same code path: a stable listing order, each object's ETag
and size in the run's snapshot, ``input_changed`` for an object changed since it was
listed or since its run was admitted (naming it), and ``--new`` taking the prefix as it is
now."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from points_support import AWS_ENV, BUCKET

import agac
from agac import api
from agac.config.project import find_project
from agac.config.workflow import load_workflow
from agac.data import objects as data_objects
from agac.data.objects import list_objects
from agac.data.sources import ObjectSource
from agac.engine.lifecycle.snapshots import snapshot_input
from agac.store.factory import open_store

ROWS = [{"id": f"r{i:02d}", "text": f"review {i}", "stars": i % 5} for i in range(1, 31)]


def parquet_bytes(rows: list[dict[str, Any]], row_group_size: int = 1000) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink, row_group_size=row_group_size)
    return sink.getvalue()


@pytest.fixture
def s3(moto_server: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import boto3

    endpoint = f"http://{moto_server[0]}:{moto_server[1]}"
    for key, value in {**AWS_ENV, "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(key, value)
    yield boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


@pytest.fixture
def prefix(s3: Any) -> str:
    """A fresh prefix holding three parquet objects (out of key order when uploaded), a
    ``_SUCCESS`` marker and a notes file agac does not read."""
    name = f"lake-{uuid.uuid4().hex[:8]}"
    for part, rows in (
        ("part-2.parquet", ROWS[20:]),
        ("part-0.parquet", ROWS[:10]),
        ("part-1.parquet", ROWS[10:20]),
    ):
        s3.put_object(Bucket=BUCKET, Key=f"{name}/date=1/{part}", Body=parquet_bytes(rows))
    s3.put_object(Bucket=BUCKET, Key=f"{name}/date=1/_SUCCESS", Body=b"")
    s3.put_object(Bucket=BUCKET, Key=f"{name}/date=1/notes.txt", Body=b"hello")
    return name


def project(root: Path, path: str, prompt: str = "Say {{ source.text }}") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "agac.yml").write_text("")
    (root / "wf.yml").write_text(
        f"name: lake\ninput: {{path: '{path}', id_field: id}}\nactions:\n"
        f'  - name: ask\n    model: mock/m\n    prompt: "{prompt}"\n'
    )
    return root


def keys(root: Path) -> list[str]:
    return [r["key"] for r in agac.results("lake", project=root).to_arrow().to_pylist()]


def test_i23_3_an_s3_prefix_is_read_in_key_order_with_each_objects_etag(
    prefix: str, tmp_path: Path, s3: Any
) -> None:
    root = project(tmp_path / "p", f"s3://{BUCKET}/{prefix}/")
    result = agac.run("wf.yml", root, progress=False)
    assert result.exit_code == 0, result.summary
    assert keys(root) == [r["id"] for r in ROWS]
    store = open_store(f"sqlite:///{root / '.agac' / 'agac.db'}")
    run = store.get_run(result.run_id)
    assert run is not None
    info = store.snapshot_info(run.snapshot_id)
    assert info is not None
    files = json.loads(info.files)
    assert [f["file"] for f in files] == [f"date=1/part-{i}.parquet" for i in range(3)]
    head = s3.head_object(Bucket=BUCKET, Key=f"{prefix}/date=1/part-0.parquet")
    assert files[0]["etag"] == head["ETag"] and files[0]["size"] == head["ContentLength"]
    assert files[0]["object"] == f"s3://{BUCKET}/{prefix}/date=1/part-0.parquet"


def test_i23_3_an_s3_glob_and_compressed_jsonl(s3: Any, tmp_path: Path) -> None:
    name = f"dump-{uuid.uuid4().hex[:8]}"
    lines = "".join(json.dumps(r) + "\n" for r in ROWS[:5]).encode()
    s3.put_object(Bucket=BUCKET, Key=f"{name}/a/x.jsonl.gz", Body=gzip.compress(lines))
    s3.put_object(Bucket=BUCKET, Key=f"{name}/b/y.jsonl.gz", Body=gzip.compress(lines))
    s3.put_object(Bucket=BUCKET, Key=f"{name}/b/z.csv", Body=b"id,text\nq,w\n")
    _, entries = list_objects(f"s3://{BUCKET}/{name}/*/*.jsonl.gz", {}, None)
    assert [e.name for e in entries] == ["a/x.jsonl.gz", "b/y.jsonl.gz"]
    root = project(tmp_path / "p", f"s3://{BUCKET}/{name}/a/*.gz")
    result = agac.run("wf.yml", root, progress=False)
    assert result.exit_code == 0 and keys(root) == [r["id"] for r in ROWS[:5]]


def test_i23_3_an_object_changed_after_listing_fails_its_rows_input_changed(
    prefix: str, tmp_path: Path, s3: Any
) -> None:
    """moto refuses the read (If-Match, 412): the changed object's rows fail
    ``input_changed`` naming it; the others are read from the versions listed."""
    root = project(tmp_path / "p", f"s3://{BUCKET}/{prefix}/")
    proj = find_project(root)
    workflow = load_workflow("wf.yml", proj)
    bucket, entries = list_objects(f"s3://{BUCKET}/{prefix}/", {}, None)
    source = ObjectSource(bucket, tuple(entries), workflow.input.path, None, frozenset({"text"}))
    s3.put_object(
        Bucket=BUCKET,
        Key=f"{prefix}/date=1/part-1.parquet",
        Body=parquet_bytes([{"id": "new", "text": "changed"}]),
    )
    store = open_store("memory")
    snap = snapshot_input(workflow, proj, store, source=source, tenant="default")
    rows = list(store.iter_records(snap.id))
    changed = [r for r in rows if r.reason == "input_changed"]
    assert [r.key for r in rows if r.reason is None] == [r["id"] for r in ROWS[:10] + ROWS[20:]]
    assert len(changed) == 1 and "date=1/part-1.parquet" in changed[0].error
    assert "changed since agac listed it" in changed[0].error


def test_i23_3_an_object_changed_while_it_is_read_fails_the_rows_not_yet_read(
    prefix: str, s3: Any
) -> None:
    """The footer was read: every row it counts that was not read yet fails by name."""
    from agac.data.objects import ObjectFile
    from agac.data.readers import read_input

    rows = [{"id": f"b{i}", "text": os.urandom(500).hex()} for i in range(6000)]
    s3.put_object(
        Bucket=BUCKET, Key=f"{prefix}/big.parquet", Body=parquet_bytes(rows, row_group_size=2000)
    )  # about 2 MB a row group
    bucket, entries = list_objects(f"s3://{BUCKET}/{prefix}/big.parquet", {}, None)
    reader = read_input(ObjectFile(bucket, entries[0]), "id")
    first = [next(reader) for _ in range(2000)]
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/big.parquet", Body=parquet_bytes(ROWS[:3]))
    rest = list(reader)
    assert all(r.ok for r in first)
    assert len(rest) == 4000 and {r.reason for r in rest} == {"input_changed"}
    assert rest[0].key == "big.parquet:2001" and "big.parquet row 2001" in str(rest[0].error)


def _cli(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        cwd=root,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_i23_3_an_open_run_over_changed_objects_is_input_changed_and_new_takes_them(
    prefix: str, tmp_path: Path, s3: Any
) -> None:
    root = project(tmp_path / "p", f"s3://{BUCKET}/{prefix}/")
    crashed = _cli(root, "run", "lake", "--json", env={"AGAC_CRASH_AT": "after_admit"})
    assert crashed.returncode != 0  # admitted, then the process died: the run is open
    s3.put_object(
        Bucket=BUCKET,
        Key=f"{prefix}/date=1/part-0.parquet",
        Body=parquet_bytes([{"id": "fresh", "text": "now"}]),
    )
    refused = _cli(root, "run", "lake", "--json")
    assert refused.returncode == 2, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "input_changed"
    assert f"s3://{BUCKET}/{prefix}/date=1/part-0.parquet changed" in error["message"]
    assert "--new" in error["message"]
    done = _cli(root, "run", "lake", "--new", "--json")
    assert done.returncode == 0, done.stderr
    assert keys(root) == ["fresh", *[r["id"] for r in ROWS[10:]]]


# -- gs:// and az:// through obstore's local store -----------------------------------------


@pytest.fixture
def local_buckets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``gs://BUCKET`` and ``az://BUCKET`` served by obstore's LocalStore under a folder:
    everything above the store (listing, If-Match reads, ranges) is the code S3 runs."""
    from obstore.store import LocalStore

    base = tmp_path / "buckets"

    def local(url: str, options: Any, what: str) -> Any:
        scheme, _, bucket = url.partition("://")
        folder = base / scheme / bucket
        folder.mkdir(parents=True, exist_ok=True)
        return LocalStore(folder)

    monkeypatch.setattr(data_objects, "open_cloud_store", local)
    return base


@pytest.mark.parametrize("scheme", ["gs", "az"])
def test_i23_3_gs_and_az_prefixes_on_the_same_code_path(
    local_buckets: Path, tmp_path: Path, scheme: str
) -> None:
    folder = local_buckets / scheme / "lake" / "events"
    folder.mkdir(parents=True)
    (folder / "b.parquet").write_bytes(parquet_bytes(ROWS[15:]))
    (folder / "a.parquet").write_bytes(parquet_bytes(ROWS[:15]))
    root = project(tmp_path / "p", f"{scheme}://lake/events/")
    result = agac.run("wf.yml", root, progress=False)
    assert result.exit_code == 0, result.summary
    assert keys(root) == [r["id"] for r in ROWS]
    bucket, entries = list_objects(f"{scheme}://lake/events/", {}, None)
    (folder / "a.parquet").write_bytes(parquet_bytes(ROWS[:2]))
    rows = list(ObjectSource(bucket, tuple(entries)).records("id"))
    assert {r.reason for r in rows if r.file == "a.parquet"} == {"input_changed"}


# -- item 5: what goes wrong with an object input is one error naming it ------------------


def _error(root: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = _cli(root, *args, "--json", env=env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    data = json.loads(done.stdout)
    return data["errors"][0] if "errors" in data else data["error"]


@pytest.mark.parametrize("command", ["validate", "run"])
def test_i23_5_an_empty_prefix_names_it_and_what_is_there(
    prefix: str, tmp_path: Path, command: str
) -> None:
    root = project(tmp_path / "p", f"s3://{BUCKET}/{prefix}/date=2/")
    error = _error(root, command, "wf.yml")
    assert error["code"] == "input_not_found"
    assert f"s3://{BUCKET}/{prefix}/date=2/" in error["message"]
    assert "date=1" in error["hint"]
    assert not (root / ".agac" / "agac.db").exists() or api.list_runs(project=root) == []


def test_i23_5_a_bucket_that_does_not_exist(s3: Any, tmp_path: Path) -> None:
    root = project(tmp_path / "p", "s3://no-such-bucket-i23/events/")
    error = _error(root, "run", "wf.yml")
    assert error["code"] == "input_not_found" and "no-such-bucket-i23" in error["message"]


def test_i23_5_an_endpoint_that_does_not_answer(s3: Any, tmp_path: Path) -> None:
    root = project(tmp_path / "p", f"s3://{BUCKET}/events/")
    (root / "agac.yml").write_text("object_options: {max_retries: 0}\n")
    error = _error(root, "validate", "wf.yml", env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    assert error["code"] == "input_unreachable"
    assert f"s3://{BUCKET}/events/" in error["message"] and "AWS_ENDPOINT_URL" in error["hint"]


def test_i23_5_credentials_refused(prefix: str, tmp_path: Path, moto_server: Any) -> None:
    """moto refuses a request signed with keys it does not know only in its auth mode; a
    bad secret under a known key is refused with 403 by a proxy standing in for it."""
    from points_support import FaultProxy

    class Refusing(FaultProxy):
        def start(self) -> FaultProxy:
            super().start()
            assert self._server is not None
            handler = self._server.RequestHandlerClass

            def refuse(h: Any) -> None:
                h._answer(403, b"<Error><Code>AccessDenied</Code></Error>", {})

            handler.do_GET = refuse  # type: ignore[attr-defined]
            return self

    proxy = Refusing(moto_server).start()
    try:
        root = project(tmp_path / "p", f"s3://{BUCKET}/{prefix}/")
        error = _error(root, "run", "wf.yml", env={"AWS_ENDPOINT_URL": proxy.url})
    finally:
        proxy.stop()
    assert error["code"] == "missing_credentials"
    assert f"s3://{BUCKET}/{prefix}/" in error["message"] and "AWS_ACCESS_KEY_ID" in error["hint"]


def test_i23_5_a_damaged_parquet_object_admits_nothing(
    prefix: str, s3: Any, tmp_path: Path
) -> None:
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/date=1/part-1.parquet", Body=b"not parquet")
    root = project(tmp_path / "p", f"s3://{BUCKET}/{prefix}/")
    error = _error(root, "run", "wf.yml")
    assert error["code"] == "input_unreadable"
    assert f"s3://{BUCKET}/{prefix}/date=1/part-1.parquet" in error["message"]
    assert api.list_runs(project=root) == []


@pytest.mark.parametrize("command", ["validate", "run"])
def test_i35_15_an_object_input_error_names_the_workflow_file_and_line(
    prefix: str, tmp_path: Path, command: str
) -> None:
    root = project(tmp_path / "p", f"s3://{BUCKET}/{prefix}/date=2/")
    error = _error(root, command, "wf.yml")
    assert error["code"] == "input_not_found"
    assert (error["file"], error["line"]) == ("wf.yml", 2), error
    done = _cli(root, command, "wf.yml")
    assert f"wf.yml:2: error: input 's3://{BUCKET}/{prefix}/date=2/'" in done.stderr, done.stderr
