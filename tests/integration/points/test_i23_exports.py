"""Issue 23 item 4: ``agac export … --out s3://bucket/key`` uploads through obstore in parts
(moto's S3 server on loopback); a failed upload leaves no object under the final name and
an earlier object of that name as it was; ``--format parquet`` per action and with
``--all-actions``."""

from __future__ import annotations

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
from points_support import AWS_ENV, BUCKET, FaultProxy

from agac.data.export import ExportFailed, _uploading

MB = 1 << 20


class FailingAfter(FaultProxy):
    """A proxy that lets ``ok_parts`` part uploads through, then answers every write 503."""

    ok_parts = 1

    @property  # type: ignore[override]
    def fail_writes(self) -> bool:
        parts = [r for r in self.log if r.method == "PUT" and "partNumber" in r.path]
        return len(parts) >= self.ok_parts

    @fail_writes.setter
    def fail_writes(self, value: bool) -> None:
        pass


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


def keys_under(s3: Any, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def test_i23_4_a_multipart_upload_that_fails_leaves_no_object_under_its_name(
    moto_server: tuple[str, int], s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"exports-{uuid.uuid4().hex[:8]}"
    s3.put_object(Bucket=BUCKET, Key=f"{name}/kept.parquet", Body=b"the earlier export")
    proxy = FailingAfter(moto_server).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        for target in ("new.parquet", "kept.parquet"):
            with (
                pytest.raises(ExportFailed) as caught,
                _uploading(
                    f"s3://{BUCKET}/{name}/{target}", {"max_retries": 0}, "x", part_bytes=5 * MB
                ) as sink,
            ):
                for _ in range(4):
                    sink.write(os.urandom(3 * MB))
            assert f"s3://{BUCKET}/{name}/{target}" in str(caught.value)
            assert "nothing was written under that name" in str(caught.value)
    finally:
        proxy.stop()
    assert keys_under(s3, f"{name}/") == [f"{name}/kept.parquet"]
    kept = s3.get_object(Bucket=BUCKET, Key=f"{name}/kept.parquet")["Body"].read()
    assert kept == b"the earlier export"
    assert any("partNumber" in r.path and r.status == 200 for r in proxy.log)  # it was multipart


def test_i23_4_an_upload_in_parts_is_the_whole_file(s3: Any) -> None:
    name = f"exports-{uuid.uuid4().hex[:8]}"
    table = pa.table({"text": [os.urandom(200).hex() for _ in range(40_000)]})  # ~16 MB
    with (
        _uploading(f"s3://{BUCKET}/{name}/big.parquet", {}, "x", part_bytes=5 * MB) as sink,
        pq.ParquetWriter(sink, table.schema, compression="none") as writer,
    ):
        writer.write_table(table, row_group_size=10_000)
    body = s3.get_object(Bucket=BUCKET, Key=f"{name}/big.parquet")["Body"].read()
    assert len(body) > 10 * MB
    assert pq.read_table(io.BytesIO(body)).equals(table)


# -- agac export, end to end -----------------------------------------------------------------

WORKFLOW = """\
name: out
input: {path: data.jsonl, id_field: id}
actions:
  - name: classify
    model: mock/m
    prompt: "Classify {{ source.text }}"
    schema: {type: object, properties: {label: {enum: [a, b]}}, required: [label]}
  - name: reply
    dependencies: [classify]
    model: mock/m
    prompt: "Reply to {{ source.text }}"
"""


def _agac(
    root: Path,
    *args: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        cwd=root,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def finished(tmp_path: Path, s3: Any) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    (root / "agac.yml").write_text("object_options: {max_retries: 0}\n")
    (root / "wf.yml").write_text(WORKFLOW)
    (root / "data.jsonl").write_text(
        "".join(json.dumps({"id": f"r{i}", "text": f"text {i}"}) + "\n" for i in range(25))
    )
    done = _agac(root, "run", "wf.yml", "--json")
    assert done.returncode == 0, done.stderr
    return root


def _parquet(s3: Any, key: str) -> pa.Table:
    return pq.read_table(io.BytesIO(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()))


def test_i23_4_export_to_s3_parquet_per_action_and_all_actions(finished: Path, s3: Any) -> None:
    name = f"exports-{uuid.uuid4().hex[:8]}"
    one = _agac(
        finished,
        "export",
        "out",
        "--action",
        "classify",
        "--format",
        "parquet",
        "--out",
        f"s3://{BUCKET}/{name}/classify.parquet",
        "--json",
    )
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["rows"] == 25
    table = _parquet(s3, f"{name}/classify.parquet")
    assert table.num_rows == 25 and "classify.label" in table.column_names
    assert "reply.text" not in table.column_names
    wide = _agac(
        finished,
        "export",
        "out",
        "--all-actions",
        "--include-source",
        "--format",
        "parquet",
        "--out",
        f"s3://{BUCKET}/{name}/wide.parquet",
    )
    assert wide.returncode == 0, wide.stderr
    table = _parquet(s3, f"{name}/wide.parquet")
    assert {"key", "classify.label", "reply.text", "source.text"} <= set(table.column_names)
    rows = _agac(
        finished, "export", "out", "--action", "reply", "--out", f"s3://{BUCKET}/{name}/reply.jsonl"
    )
    assert rows.returncode == 0, rows.stderr
    body = s3.get_object(Bucket=BUCKET, Key=f"{name}/reply.jsonl")["Body"].read().decode()
    assert len(body.splitlines()) == 25 and json.loads(body.splitlines()[0])["key"] == "r0"


def test_i23_4_a_refused_export_exits_1_naming_the_object_and_writes_nothing(
    finished: Path, s3: Any, moto_server: tuple[str, int]
) -> None:
    name = f"exports-{uuid.uuid4().hex[:8]}"
    proxy = FaultProxy(moto_server).start()
    proxy.fail_writes = True
    try:
        done = _agac(
            finished,
            "export",
            "out",
            "--all-actions",
            "--format",
            "parquet",
            "--out",
            f"s3://{BUCKET}/{name}/wide.parquet",
            "--json",
            env={"AWS_ENDPOINT_URL": proxy.url},
        )
    finally:
        proxy.stop()
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "export_failed"
    assert f"s3://{BUCKET}/{name}/wide.parquet" in error["message"]
    assert keys_under(s3, f"{name}/") == []
