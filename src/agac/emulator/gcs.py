"""A minimal Cloud Storage under ``/gcs``: the XML API's object calls that obstore (and so
agac) makes, and the objects Vertex AI's batch jobs read and write (:mod:`.vertex`).

Point obstore at it with a service account whose JSON names ``"gcs_base_url":
"http://127.0.0.1:<port>/gcs"`` and ``"disable_oauth": true`` (``GOOGLE_SERVICE_ACCOUNT``),
and allow plain HTTP. Served:

- ``PUT /gcs/{bucket}/{key}`` stores the body in one request; ``GET`` and ``HEAD`` read it
  back with ``ETag``, ``Last-Modified`` and ``Content-Length``; ``DELETE`` removes it (404
  when it is not there);
- the XML API's multipart upload, as obstore makes it above its single-request size (and
  for every export to ``gs://``): ``POST …?uploads`` starts one
  (``InitiateMultipartUploadResult`` with an ``UploadId``), ``PUT …?partNumber=n&uploadId=…``
  stores a part (its ``ETag``), ``POST …?uploadId=…`` with a ``CompleteMultipartUpload``
  body joins the parts it lists, in ascending order and with their ETags, into the object
  (only then is it there to read; every part but the last at least 5 MiB, as Cloud Storage
  requires), and ``DELETE …?uploadId=…`` aborts it. A finished upload stays in
  ``EmulatorState.gcs_uploads`` (``ended``: ``completed`` or ``aborted``) for the tests to see;
- ``GET /gcs/{bucket}?list-type=2&prefix=…`` lists the objects under a prefix
  (``ListBucketResult``, one page).

Every bucket exists; objects live in the emulator's memory and go on reset.
"""

from __future__ import annotations

import hashlib
import uuid
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from email.utils import formatdate
from typing import Any
from xml.sax.saxutils import escape

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .handling import state_of
from .state import EmulatorState

__all__ = ["read_object", "routes", "write_object"]


def write_object(state: EmulatorState, bucket: str, key: str, data: bytes) -> None:
    state.objects[f"{bucket}/{key}"] = (data, state.clock.now())


def read_object(state: EmulatorState, bucket: str, key: str) -> bytes | None:
    found = state.objects.get(f"{bucket}/{key}")
    return found[0] if found is not None else None


def _etag(data: bytes) -> str:
    return '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'


def _missing(bucket: str, key: str) -> Response:
    body = (
        "<?xml version='1.0' encoding='UTF-8'?><Error><Code>NoSuchKey</Code>"
        f"<Message>No such object: {escape(bucket)}/{escape(key)}</Message></Error>"
    )
    return Response(body, status_code=404, media_type="application/xml")


async def put_object(request: Request) -> Response:
    if "uploadId" in request.query_params:
        return await put_part(request)
    bucket, key = request.path_params["bucket"], request.path_params["key"]
    data = await request.body()
    write_object(state_of(request), bucket, key, data)
    return Response(b"", headers={"ETag": _etag(data), "x-goog-generation": "1"})


async def get_object(request: Request) -> Response:
    state = state_of(request)
    bucket, key = request.path_params["bucket"], request.path_params["key"]
    found = state.objects.get(f"{bucket}/{key}")
    if found is None:
        return _missing(bucket, key)
    data, written = found
    headers = {
        "ETag": _etag(data),
        "Last-Modified": formatdate(written, usegmt=True),
        "Content-Length": str(len(data)),
        "x-goog-generation": "1",
    }
    body = b"" if request.method == "HEAD" else data
    return Response(body, headers=headers, media_type="application/octet-stream")


async def delete_object(request: Request) -> Response:
    if "uploadId" in request.query_params:
        return abort_upload(request)
    state = state_of(request)
    bucket, key = request.path_params["bucket"], request.path_params["key"]
    if state.objects.pop(f"{bucket}/{key}", None) is None:
        return _missing(bucket, key)
    return Response(b"", status_code=204)


async def list_objects(request: Request) -> Response:
    state = state_of(request)
    bucket = request.path_params["bucket"]
    prefix = request.query_params.get("prefix") or ""
    head = f"{bucket}/{prefix}"
    rows = []
    for name in sorted(k for k in state.objects if k.startswith(head)):
        data, written = state.objects[name]
        stamp = _iso(written)
        rows.append(
            f"<Contents><Key>{escape(name.split('/', 1)[1])}</Key>"
            f"<LastModified>{stamp}</LastModified><ETag>{escape(_etag(data))}</ETag>"
            f"<Size>{len(data)}</Size></Contents>"
        )
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<ListBucketResult xmlns="http://doc.s3.amazonaws.com/2006-03-01">'
        f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"
        f"<KeyCount>{len(rows)}</KeyCount><MaxKeys>1000</MaxKeys>"
        f"<IsTruncated>false</IsTruncated>{''.join(rows)}</ListBucketResult>"
    )
    return Response(body, media_type="application/xml")


# -- multipart uploads (the XML API's) ------------------------------------------------

#: Cloud Storage's smallest part of a multipart upload, but for the last.
MIN_PART_BYTES = 5 * 1024 * 1024
_S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"


def _xml_error(status: int, code: str, message: str) -> Response:
    body = (
        "<?xml version='1.0' encoding='UTF-8'?>"
        f"<Error><Code>{code}</Code><Message>{escape(message)}</Message></Error>"
    )
    return Response(body, status_code=status, media_type="application/xml")


def _open_upload(request: Request) -> dict[str, Any] | Response:
    """The upload the query's ``uploadId`` names, still open, else the error to answer."""
    upload = state_of(request).gcs_uploads.get(request.query_params["uploadId"])
    bucket, key = request.path_params["bucket"], request.path_params["key"]
    if upload is None or upload["object"] != f"{bucket}/{key}" or upload["ended"]:
        return _xml_error(404, "NoSuchUpload", "The requested upload was not found.")
    return upload


async def post_object(request: Request) -> Response:
    """``?uploads`` starts a multipart upload; ``?uploadId=`` completes one."""
    if "uploadId" in request.query_params:
        return await complete_upload(request)
    if "uploads" not in request.query_params:
        return _xml_error(400, "InvalidArgument", "POST on an object needs ?uploads or ?uploadId.")
    bucket, key = request.path_params["bucket"], request.path_params["key"]
    upload_id = "emu-" + uuid.uuid4().hex
    state_of(request).gcs_uploads[upload_id] = {
        "object": f"{bucket}/{key}",
        "parts": {},
        "ended": None,
    }
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<InitiateMultipartUploadResult xmlns="{_S3_NS}"><Bucket>{escape(bucket)}</Bucket>'
        f"<Key>{escape(key)}</Key><UploadId>{upload_id}</UploadId>"
        "</InitiateMultipartUploadResult>"
    )
    return Response(body, media_type="application/xml")


async def put_part(request: Request) -> Response:
    upload = _open_upload(request)
    if isinstance(upload, Response):
        return upload
    try:
        number = int(request.query_params.get("partNumber") or "")
    except ValueError:
        number = 0
    if not 1 <= number <= 10_000:
        return _xml_error(400, "InvalidArgument", "partNumber must be 1 to 10000.")
    data = await request.body()
    upload["parts"][number] = data
    return Response(b"", headers={"ETag": _etag(data)})


def _listed_parts(raw: bytes) -> list[tuple[int, str]] | None:
    """(part number, ETag) of a ``CompleteMultipartUpload`` body, None when malformed."""
    try:
        root = ET.fromstring(raw)
    except ET.ParseError:
        return None
    listed = []
    for part in root.iter():
        if part.tag.rpartition("}")[2] != "Part":
            continue
        fields = {child.tag.rpartition("}")[2]: (child.text or "") for child in part}
        if not fields.get("PartNumber", "").isdigit():
            return None
        listed.append((int(fields["PartNumber"]), fields.get("ETag", "").strip()))
    return listed


async def complete_upload(request: Request) -> Response:
    upload = _open_upload(request)
    if isinstance(upload, Response):
        return upload
    listed = _listed_parts(await request.body())
    if not listed:
        return _xml_error(400, "MalformedXML", "The CompleteMultipartUpload body lists no parts.")
    numbers = [n for n, _ in listed]
    if numbers != sorted(set(numbers)):
        return _xml_error(400, "InvalidPartOrder", "Parts must be listed in ascending order.")
    parts: dict[int, bytes] = upload["parts"]
    for number, etag in listed:
        if number not in parts or etag.strip('"') != _etag(parts[number]).strip('"'):
            return _xml_error(400, "InvalidPart", f"Part {number} was not uploaded as listed.")
    if any(len(parts[n]) < MIN_PART_BYTES for n in numbers[:-1]):
        return _xml_error(400, "EntityTooSmall", "A part but the last is under 5 MiB.")
    data = b"".join(parts[n] for n in numbers)
    bucket, _, key = str(upload["object"]).partition("/")
    write_object(state_of(request), bucket, key, data)
    upload.update(ended="completed", parts={}, size=len(data), part_count=len(numbers))
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<CompleteMultipartUploadResult xmlns="{_S3_NS}"><Bucket>{escape(bucket)}</Bucket>'
        f"<Key>{escape(key)}</Key><ETag>{escape(_etag(data))}</ETag>"
        "</CompleteMultipartUploadResult>"
    )
    return Response(body, media_type="application/xml")


def abort_upload(request: Request) -> Response:
    upload = _open_upload(request)
    if isinstance(upload, Response):
        return upload
    upload.update(ended="aborted", parts={})
    return Response(b"", status_code=204)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def routes() -> list[Route]:
    return [
        Route("/gcs/{bucket}", list_objects, methods=["GET"]),
        Route("/gcs/{bucket}/{key:path}", put_object, methods=["PUT"]),
        Route("/gcs/{bucket}/{key:path}", post_object, methods=["POST"]),
        Route("/gcs/{bucket}/{key:path}", get_object, methods=["GET", "HEAD"]),
        Route("/gcs/{bucket}/{key:path}", delete_object, methods=["DELETE"]),
    ]
