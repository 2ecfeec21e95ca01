"""The emulator's Cloud Storage speaks the XML API's multipart upload, as obstore makes
it: a batch input above the single-request size goes up in parts through agac's own
upload (``GcsStore.put_file``), as does an export to ``gs://`` (``agac export --out``),
is there only once completed, and reads back whole; the
emulator refuses what Cloud Storage refuses (a small part before the last, a part not
uploaded as listed, an unknown upload)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from vertex_support import BUCKET

from agac import api
from agac.providers._gcs import GcsStore
from agac.testing import write_project

MB = 1024 * 1024


def _uploads(emulator: Any) -> list[dict[str, Any]]:
    return list(emulator.state.gcs_uploads.values())


async def test_i41_vertex_gcs_input_above_the_threshold_goes_up_in_parts(
    gcp: Any, emulator: Any, tmp_path: Path
) -> None:
    """A 12 MiB file with the threshold at 6 MiB: obstore's parts of 5 MiB (three),
    joined by the emulator into the object agac wrote, byte for byte; a file below the
    threshold goes in one request (no upload started)."""
    big = tmp_path / "records.jsonl"
    lines = [b'{"request": {"n": %d, "pad": "%s"}}\n' % (i, b"x" * 990) for i in range(12_600)]
    big.write_bytes(b"".join(lines))
    assert big.stat().st_size > 12 * MB
    store = GcsStore("vertex", multipart_bytes=6 * MB)
    await store.put_file(BUCKET, "mp/input/records.jsonl", big)
    [upload] = _uploads(emulator)
    assert upload["ended"] == "completed" and upload["part_count"] == 3
    data, _ = emulator.state.objects[f"{BUCKET}/mp/input/records.jsonl"]
    assert hashlib.sha256(data).digest() == hashlib.sha256(big.read_bytes()).digest()
    read = [line async for line in store.lines(BUCKET, "mp/input/records.jsonl")]
    assert len(read) == 12_600 and read[-1] == lines[-1].rstrip(b"\n")
    small = tmp_path / "small.jsonl"
    small.write_bytes(os.urandom(1024))
    await store.put_file(BUCKET, "mp/small.jsonl", small)
    assert len(_uploads(emulator)) == 1
    assert emulator.state.objects[f"{BUCKET}/mp/small.jsonl"][0] == small.read_bytes()


def _complete(parts: list[tuple[int, str]]) -> bytes:
    listed = "".join(f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>" for n, e in parts)
    return f"<CompleteMultipartUpload>{listed}</CompleteMultipartUpload>".encode()


def test_i41_vertex_gcs_multipart_refuses_what_cloud_storage_refuses(emulator: Any) -> None:
    """Nothing is there before the upload completes; a part under 5 MiB before the last,
    a part listed with another ETag or out of order, and an aborted upload are refused,
    and none of them leaves an object."""
    url = f"{emulator.url}/gcs/{BUCKET}/refused/object.bin"
    with httpx.Client(timeout=30) as http:
        started = http.post(url, params={"uploads": ""})
        assert started.status_code == 200
        upload_id = started.text.split("<UploadId>")[1].split("</UploadId>")[0]
        etags = []
        for number in (1, 2):
            put = http.put(
                url, params={"partNumber": number, "uploadId": upload_id}, content=b"p" * 100
            )
            etags.append(put.headers["ETag"])
        assert http.get(url).status_code == 404  # not there until completed
        done = http.post(
            url, params={"uploadId": upload_id}, content=_complete([(1, etags[0]), (2, etags[1])])
        )
        assert done.status_code == 400 and "EntityTooSmall" in done.text
        wrong = http.post(url, params={"uploadId": upload_id}, content=_complete([(1, '"0"')]))
        assert wrong.status_code == 400 and "InvalidPart" in wrong.text
        order = http.post(
            url, params={"uploadId": upload_id}, content=_complete([(2, etags[1]), (1, etags[0])])
        )
        assert order.status_code == 400 and "InvalidPartOrder" in order.text
        assert http.delete(url, params={"uploadId": upload_id}).status_code == 204
        again = http.post(url, params={"uploadId": upload_id}, content=_complete([(2, etags[1])]))
        assert again.status_code == 404 and "NoSuchUpload" in again.text
        assert http.get(url).status_code == 404
        one = http.post(url, params={"uploads": ""}).text
        one_id = one.split("<UploadId>")[1].split("</UploadId>")[0]
        tag = http.put(url, params={"partNumber": 1, "uploadId": one_id}, content=b"z").headers
        whole = http.post(url, params={"uploadId": one_id}, content=_complete([(1, tag["ETag"])]))
        assert whole.status_code == 200 and http.get(url).content == b"z"


def test_i41_vertex_gcs_export_to_gs_goes_up_in_parts(
    gcp: Any, emulator: Any, tmp_path: Path
) -> None:
    """``agac export --out gs://…`` with the Vertex user's environment: an export of about
    10 MiB goes up as a multipart upload in parts of 8 MiB (two), to the emulator's Cloud
    Storage, and the object is byte for byte the export written to a local file."""
    root = tmp_path / "proj"
    rows = [{"id": f"r{i}", "blob": f"{i:04d}" + "x" * (MB - 4)} for i in range(10)]
    workflow = """
        name: big
        input: {path: data/, id_field: id}
        actions:
          - {name: ask, model: mock/m, prompt: "Say {{ source.id }}"}
    """
    write_project(root, workflow, data={"data/a.jsonl": rows})
    assert api.run("big", root).exit_code == 0
    url = f"gs://{BUCKET}/exports/big.jsonl"
    common = ["export", "big", "--all-actions", "--include-source", "--format", "jsonl"]
    local = tmp_path / "big.jsonl"
    for out in (url, str(local)):
        done = subprocess.run(
            [sys.executable, "-m", "agac.cli.main", *common, "--out", out],
            cwd=root,
            env=dict(os.environ),
            capture_output=True,
            text=True,
            timeout=300,  # a guard against a hang only
            check=False,
        )
        assert done.returncode == 0, done.stderr
    [upload] = _uploads(emulator)
    assert upload["ended"] == "completed" and upload["part_count"] == 2
    data, _ = emulator.state.objects[f"{BUCKET}/exports/big.jsonl"]
    assert len(data) > 10 * MB and data == local.read_bytes()
