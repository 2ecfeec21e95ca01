"""A minimal Cloud Storage under ``/gcs``: the XML API's object calls that obstore (and so
agac) makes, and the objects Vertex AI's batch jobs read and write (:mod:`.vertex`).

Point obstore at it with a service account whose JSON names ``"gcs_base_url":
"http://127.0.0.1:<port>/gcs"`` and ``"disable_oauth": true`` (``GOOGLE_SERVICE_ACCOUNT``),
and allow plain HTTP. Served:

- ``PUT /gcs/{bucket}/{key}`` stores the body (one request; multipart uploads are not
  emulated); ``GET`` and ``HEAD`` read it back with ``ETag``, ``Last-Modified`` and
  ``Content-Length``; ``DELETE`` removes it (404 when it is not there);
- ``GET /gcs/{bucket}?list-type=2&prefix=…`` lists the objects under a prefix
  (``ListBucketResult``, one page).

Every bucket exists; objects live in the emulator's memory and go on reset.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from email.utils import formatdate
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


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def routes() -> list[Route]:
    return [
        Route("/gcs/{bucket}", list_objects, methods=["GET"]),
        Route("/gcs/{bucket}/{key:path}", put_object, methods=["PUT"]),
        Route("/gcs/{bucket}/{key:path}", get_object, methods=["GET", "HEAD"]),
        Route("/gcs/{bucket}/{key:path}", delete_object, methods=["DELETE"]),
    ]
