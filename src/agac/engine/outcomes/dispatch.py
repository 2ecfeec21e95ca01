"""One online call of a unit as one object for its whole life (engine/walk/calls.py):
the entry the dispatch marks list (S1, engine/outcomes/marks.py), the hold on the
action's concurrency slot, and the wire body of the request it sends.

Before this, each attempt built a slot hold of its own and each wait for a slot a mark
entry of its own, and the request's wire body was encoded by the adapter after the slot
came. Now the call path builds one :class:`Dispatch` per unit's call; the marks keep it in
their queues as it is, its mark entry is encoded once per request it sends (a retry of
the same request encodes nothing again), and its wire body is encoded before it waits
for a slot, so a unit handed a freed slot sends at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agac.providers.base import Request
    from agac.providers.encoded import EncodedCall

__all__ = ["Dispatch", "Pool", "Releases"]


class Pool(Protocol):
    """An action's slots as the call path holds them: a slot goes back synchronously
    (the store's writer gives it back in its commit)."""

    def release(self) -> None: ...


class Releases(Protocol):
    """What a call tells the dispatch marks when its slot goes back."""

    def release(self, entry: Dispatch) -> None: ...


class Dispatch:
    """A unit's call: what the marks list for it, its slot, and its wire body.

    ``request`` is what goes out at the next send; ``listed`` is its mark entry (JSON
    text: key, fingerprint, worst case), encoded by the marks for ``listed_for``;
    ``body`` is the request's wire body for ``body_for`` (None: the adapter encodes it
    at the send). ``held``: the call holds a slot; ``expected``: the marks count it
    (from ``expect`` until ``release``)."""

    __slots__ = (
        "action",
        "body",
        "body_for",
        "expected",
        "fp",
        "held",
        "key",
        "listed",
        "listed_for",
        "marks",
        "pool",
        "request",
        "seq",
        "shard",
        "width",
    )

    def __init__(
        self,
        pool: Pool,
        marks: Releases | None,
        action: str,
        width: int,
        key: str,
        seq: int,
        fp: str,
        request: Request,
    ) -> None:
        self.pool, self.marks, self.action, self.width = pool, marks, action, width
        self.key, self.seq, self.fp, self.request = key, seq, fp, request
        self.held = False
        self.expected = False
        self.shard = ""
        self.listed = ""
        self.listed_for: Request | None = None
        self.body: EncodedCall | None = None
        self.body_for: Request | None = None

    def give_back(self) -> None:
        """The slot goes back (once), and the unit leaves the dispatch marks: by the
        store's writer when its answer's commit is done (``on_durable``), or when the
        attempt ends any other way."""
        if self.held:
            self.held = False
            self.pool.release()
        if self.expected and self.marks is not None:
            self.marks.release(self)
