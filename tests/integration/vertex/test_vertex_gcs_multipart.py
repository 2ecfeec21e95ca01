"""The emulator's Cloud Storage speaks the XML API's multipart upload, as obstore makes
it: a batch input above the single-request size goes up in parts through agac's own
upload (``GcsStore.put_file``), is there only once completed, and reads back whole; the
emulator refuses what Cloud Storage refuses (a small part before the last, a part not
uploaded as listed, an unknown upload)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import httpx
from vertex_support import BUCKET

from agac.providers._gcs import GcsStore

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
