"""Issue 29 item 19, the service's edges: a page number past what a listing takes is 422
(not a 500 with a store error), and a decision body over the service's limit is 413 —
refused before it is all read, with or without a Content-Length."""

from __future__ import annotations

from collections.abc import Iterator

from service_support import Service

from agac.api.team import MAX_PAGE
from agac.service.apiv1 import MAX_BODY


def test_i29_19_a_huge_page_is_422(service: Service) -> None:
    with service.api("bob") as bob:
        for page in (str(10**30), str(2**63), str(MAX_PAGE + 1)):
            r = bob.get(f"/api/v1/runs?page={page}")
            assert r.status_code == 422, r.text
            assert r.json()["error"]["code"] == "invalid"
        last = bob.get(f"/api/v1/runs?page={MAX_PAGE}")
        assert last.status_code == 200 and last.json()["runs"] == []


def test_i29_19_a_body_over_the_limit_is_413(service: Service) -> None:
    with service.api("ann") as ann:
        pending = ann.get("/api/v1/approvals").json()["approvals"]
        url = f"/api/v1/approvals/{pending[0]['id']}/reject"
        big = b'{"reason": "' + b"x" * MAX_BODY + b'"}'
        r = ann.post(url, content=big)
        assert r.status_code == 413, r.text
        assert r.json()["error"]["code"] == "too_large"

        def chunks() -> Iterator[bytes]:  # no Content-Length: chunked
            yield b'{"reason": "'
            for _ in range(MAX_BODY // 1024 + 1):
                yield b"y" * 1024
            yield b'"}'

        r = ann.post(url, content=chunks())
        assert r.status_code == 413, r.text
        # Nothing was decided: the proposal is still pending, and a body within the limit works.
        assert ann.get("/api/v1/approvals").json()["approvals"][0]["state"] == "pending"
        ok = ann.post(url, json={"reason": "not this one"})
        assert ok.status_code == 200, ok.text
