"""One OpenAI batch file, one endpoint: every line of a Batch API input file must name
the batch's ``endpoint`` as its ``url`` (``/v1/chat/completions`` or ``/v1/responses``),
or the provider refuses the file. A batch holds one action's requests, so its endpoint is
its first request's; a line naming another is refused here, before the upload."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator

from agac.errors import FatalError
from agac.providers.base import Attachment, Request, StoredRequests, stored_request

__all__ = ["batch_endpoint", "one_endpoint"]

Line = bytes | list[bytes | Attachment]


def batch_endpoint(
    requests: Iterable[Request], endpoint_of: Callable[[Request], str], default: str
) -> tuple[str, Iterable[Request]]:
    """The endpoint of a batch (``endpoint_of`` its first request; ``default`` for none)
    and its requests again, that first one put back (they are streamed once)."""
    if isinstance(requests, StoredRequests):
        pairs = iter(requests.pairs)
        first = next(pairs, None)
        if first is None:
            return default, requests
        endpoint = endpoint_of(stored_request(first[1], first[0], requests.cache))
        return endpoint, StoredRequests(itertools.chain([first], pairs), requests.cache)
    items = iter(requests)
    head = next(items, None)
    if head is None:
        return default, ()
    return endpoint_of(head), itertools.chain([head], items)


def one_endpoint(lines: Iterable[Line], endpoint: str) -> Iterator[Line]:
    """A batch file's lines, each checked to name ``endpoint`` where it names a ``url``
    (a line's routing comes first: ``{"custom_id", "method", "url", "body"}``)."""
    routed = b'"method":"POST","url":'
    marker = routed + json.dumps(endpoint).encode()
    for line in lines:
        head = line if isinstance(line, bytes) else line[0]
        if isinstance(head, bytes) and routed in head[:200] and marker not in head[:200]:
            raise FatalError(
                f"a batch line names another endpoint than the batch's {endpoint}: one "
                "batch file holds one endpoint's requests",
                reason="invalid_request",
            )
        yield line
