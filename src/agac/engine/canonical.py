"""A request's canonical JSON (what its fingerprint hashes, docs/getting-started.md), made per action.

Every request of one action shares its provider, model, limits and schema; only its
messages and seed differ. :class:`CanonicalForm` encodes the shared parts once and the
rest per request, byte for byte what ``Request.canonical()`` produces
(``tests/unit/engine/test_canonical_form.py`` holds it to that).
"""

from __future__ import annotations

from json.encoder import encode_basestring as _string  # the C encoder canonical() uses
from typing import TYPE_CHECKING, Any

from agac.jsontext import canonical

if TYPE_CHECKING:
    from agac.providers.base import Request

__all__ = ["CanonicalForm"]


class CanonicalForm:
    """The canonical JSON of one action's requests (``Request.canonical()``, byte for byte)
    with the parts every request of the action shares — provider, model, limits, schema —
    encoded once: only the messages and the seed are encoded per request. A request that
    differs in a shared part (an approved revision), or with attachments, tools or web
    search, is encoded whole."""

    def __init__(
        self, provider: str, model: str, max_tokens: int, temperature: float | None, schema: Any
    ) -> None:
        self.shared = (provider, model, max_tokens, temperature)
        self.schema = schema
        self.head = '{"max_tokens":' + canonical(max_tokens) + ',"messages":['
        self.middle = (
            '],"model":'
            + canonical(model)
            + ',"provider":'
            + canonical(provider)
            + ',"schema":'
            + canonical(schema)
            + ',"seed":'
        )
        self.tail = ',"temperature":' + canonical(temperature) + "}"

    def of(self, request: Request) -> str:
        if (
            (request.provider, request.model, request.max_tokens, request.temperature)
            != self.shared
            or request.schema is not self.schema
            or request.options
            or request.tools
            or request.web_search is not None
            or any(m.attachments for m in request.messages)
        ):
            return request.canonical()
        messages = ",".join(
            '{"content":' + _string(m.content) + ',"role":' + _string(m.role) + "}"
            for m in request.messages
        )
        seed = "null" if request.seed is None else canonical(request.seed)
        return self.head + messages + self.middle + seed + self.tail
