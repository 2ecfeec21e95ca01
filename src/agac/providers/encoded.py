"""A live call's wire body encoded ahead of its send: the engine asks an adapter that
can (:class:`SupportsEncodedCalls`) to encode the body while the unit waits for a slot,
so that a unit handed a freed slot sends at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agac.providers.base import Request, Response

__all__ = ["EncodedCall", "SupportsEncodedCalls"]


@dataclass(frozen=True, slots=True)
class EncodedCall:
    """A live call's wire body, encoded ahead of its send by the adapter that sends it;
    ``form`` is the adapter's note of how it was encoded (a body whose form no longer
    holds at the send is encoded again)."""

    body: bytes
    form: str


@runtime_checkable
class SupportsEncodedCalls(Protocol):
    """A provider whose live call's wire body can be encoded apart from its send: the
    engine encodes it while the unit waits for a slot, so that a unit handed a freed slot
    sends at once. ``encode_call`` gives None for a request it leaves to the send
    (attachments, which are read at the send; the SDK transport); ``complete_encoded``
    answers as :meth:`Provider.complete` would."""

    def encode_call(self, request: Request) -> EncodedCall | None: ...

    async def complete_encoded(self, request: Request, encoded: EncodedCall) -> Response: ...
