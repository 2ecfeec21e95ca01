"""Budgets (R5): worst-case reservations before a call or a batch submission, settled
to actual usage after.

A run with a budget holds one :class:`BudgetGuard`. Every live call reserves
``ceil(chars / 4)`` input tokens plus ``max_tokens`` output tokens, priced at the live
tier, before it is sent; a batch part reserves the same for each of its requests at
the batch tier. When the next reservation would cross the cap the guard says no and
stays *exhausted*: the run sends nothing more, lets what is out finish, and skips the
units it never sent (``budget_exhausted``).

What was spent is the run's usage ledger (plus, for a retry, what the runs it retries
spent before it), so the guard is rebuilt from the store whenever the run starts or
its batch step runs; between those points it counts in memory. A run without a
budget has no guard and does no extra work.

In worker mode several processes spend from one run at once, so a shard's guard also has
a ``ledger`` to read: before each reservation it reads what the run has spent (every
worker's committed usage) and counts its own settlements since that read on top. Reads
are coalesced: concurrent reservations of one guard share the next read.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agac.media import Attachment, estimate_tokens

if TYPE_CHECKING:
    from agac.config.model import Action
    from agac.providers.base import Request, Usage
    from agac.providers.pricing import PriceTable
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = [
    "BudgetGuard",
    "Reservation",
    "RunLedger",
    "request_estimate",
    "spent_before",
    "spent_by",
    "within_cap",
]


def within_cap(usd: float, cap: float) -> bool:
    """Whether a cost of ``usd`` stays under ``cap``, failing closed: a cost that is NaN or
    infinite (which no valid price makes, but a comparison with NaN is always false) is
    over every cap."""
    return math.isfinite(usd) and usd <= cap + 1e-12


@dataclass(frozen=True, slots=True)
class Reservation:
    usd: float
    tokens: int


def request_estimate(chars: int, max_tokens: int) -> tuple[int, int]:
    """(input, output) tokens of one request at worst: ``ceil(chars / 4)`` and ``max_tokens``."""
    return math.ceil(chars / 4), max_tokens


def _chars(messages: Any) -> int:
    return sum(len(m.content) if hasattr(m, "content") else len(m["content"]) for m in messages)


def reserved_searches(search: dict[str, Any] | None) -> int:
    """The web searches one request offering ``search`` is reserved for: its ``max_uses``,
    or one (a provider may search more often: ``max_uses`` bounds it)."""
    if search is None:
        return 0
    return int(search.get("max_uses") or 1)


def attachment_tokens(provider: str, messages: Any) -> int:
    """The input tokens of the messages' attachments, estimated by the provider's published
    rules (:func:`agac.media.estimate_tokens`); messages as values or as stored dicts."""
    total = 0
    for m in messages:
        atts = m.attachments if hasattr(m, "attachments") else m.get("attachments")
        for a in atts or ():
            total += estimate_tokens(
                provider, a if isinstance(a, Attachment) else Attachment.from_dict(a)
            )
    return total


@dataclass
class BudgetGuard:
    """The cap, what is spent (settled) and what is reserved (in flight or out)."""

    usd: float | None
    tokens: int | None
    prices: PriceTable
    spent_usd: float = 0.0
    spent_tokens: int = 0
    reserved_usd: float = 0.0
    reserved_tokens: int = 0
    exhausted: bool = False
    held: dict[str, Reservation] = field(default_factory=dict)
    """Reservations of batches this run has out, by batch key."""
    ledger: Callable[[], Awaitable[tuple[float, int]]] | None = None
    """What the run has spent, read from the store (worker mode: others spend too), or None."""
    _own_usd: float = 0.0
    _own_tokens: int = 0
    _next_read: asyncio.Future[None] | None = None
    _reader: asyncio.Task[None] | None = None

    # -- pricing ----------------------------------------------------------------------------

    def worst_case(
        self, model: str, input_tokens: int, output_tokens: int, tier: str, searches: int = 0
    ) -> Reservation:
        from agac.providers.base import Usage

        tools = (("web_search", searches),) if searches else ()
        usd = self.prices.cost(model, Usage(input_tokens, output_tokens, server_tools=tools), tier)
        return Reservation(usd, input_tokens + output_tokens)

    def for_request(self, action: Action, request: Request) -> Reservation:
        """The worst case of one live call of ``request``, at the tier it is sent at."""
        i, o = request_estimate(_chars(request.messages), request.max_tokens)
        if action.attachments:
            i += attachment_tokens(request.provider, request.messages)
        search = request.web_search.to_dict() if request.web_search is not None else None
        return self.worst_case(
            action.model or "", i, o, request.ledger_tier, reserved_searches(search)
        )

    def for_request_json(self, action: Action, request: dict[str, Any], tier: str) -> Reservation:
        i, o = request_estimate(_chars(request["messages"]), int(request["max_tokens"]))
        if action.attachments:
            i += attachment_tokens(str(request.get("provider", "")), request["messages"])
        return self.worst_case(
            action.model or "", i, o, tier, reserved_searches(request.get("web_search"))
        )

    # -- reserve and settle ---------------------------------------------------------------------

    def fits(self, r: Reservation) -> bool:
        if self.usd is not None and not within_cap(
            self.spent_usd + self.reserved_usd + r.usd, self.usd
        ):
            return False
        return not (
            self.tokens is not None
            and self.spent_tokens + self.reserved_tokens + r.tokens > self.tokens
        )

    def reserve(self, r: Reservation) -> bool:
        """Hold ``r`` if it fits under the cap; once one does not, the guard is exhausted
        and every later reservation is refused too (nothing more is sent)."""
        if self.exhausted or not self.fits(r):
            self.exhausted = True
            return False
        self.reserved_usd += r.usd
        self.reserved_tokens += r.tokens
        return True

    def settle(self, r: Reservation, usd: float, tokens: int) -> None:
        self.reserved_usd -= r.usd
        self.reserved_tokens -= r.tokens
        self.spent_usd += usd
        self.spent_tokens += tokens
        self._own_usd += usd
        self._own_tokens += tokens

    async def refresh(self) -> None:
        """Before a reservation: with a ``ledger``, wait for a read of it that starts after
        this call, so that what other processes committed counts. What they have in
        flight is not in the ledger: at most their calls in flight, the documented bound."""
        if self.ledger is None or self.exhausted:
            return
        if self._next_read is None:
            self._next_read = asyncio.get_running_loop().create_future()
            if self._reader is None or self._reader.done():
                self._reader = asyncio.get_running_loop().create_task(self._read())
        await asyncio.shield(self._next_read)

    async def _read(self) -> None:
        assert self.ledger is not None
        while self._next_read is not None:
            waiting, self._next_read = self._next_read, None
            own_usd, own_tokens = self._own_usd, self._own_tokens
            try:
                usd, tokens = await self.ledger()
            except BaseException as exc:
                waiting.set_exception(exc)
                waiting.exception()  # mark retrieved: every waiter re-raises it
                if not isinstance(exc, Exception):
                    raise
                continue
            # Settlements since the read started may be in it already (counted twice at
            # worst, which only makes the guard stricter). The ledger only grows, and the
            # guard's own count holds its settlements the read may have missed (not yet
            # committed when it started): keep the larger of the two.
            self.spent_usd = max(self.spent_usd, usd + self._own_usd - own_usd)
            self.spent_tokens = max(self.spent_tokens, tokens + self._own_tokens - own_tokens)
            waiting.set_result(None)

    def settle_usage(
        self, r: Reservation, model: str, usage: Usage | None, tier: str = "live"
    ) -> None:
        if usage is None:
            self.settle(r, 0.0, 0)
            return
        tokens = (
            usage.input_tokens
            + usage.cached_tokens
            + usage.cache_write_tokens
            + usage.output_tokens
        )
        self.settle(r, self.prices.cost(model, usage, tier), tokens)

    def hold(self, key: str, r: Reservation) -> None:
        """Keep a submitted batch's reservation until the batch is no longer out."""
        self.held[key] = r

    def replace_held(self, held: dict[str, Reservation]) -> None:
        """The run's batches out as the store has them now (worker mode: another worker
        may have submitted or read one since this guard was synced)."""
        self.reserved_usd += sum(r.usd for r in held.values()) - sum(
            r.usd for r in self.held.values()
        )
        self.reserved_tokens += sum(r.tokens for r in held.values()) - sum(
            r.tokens for r in self.held.values()
        )
        self.held = dict(held)

    # -- from the store -----------------------------------------------------------------------

    def sync(self, store: Store, run: RunRecord, open_batches: dict[str, Reservation]) -> None:
        """Rebuild spent and held from the store (nothing may be in flight): the ledger of
        the run (and of those it retries), and the reservations of its batches still out."""
        usd, tokens = spent_by(store, run)
        self.spent_usd, self.spent_tokens = usd, tokens
        self.held = dict(open_batches)
        self.reserved_usd = sum(r.usd for r in self.held.values())
        self.reserved_tokens = sum(r.tokens for r in self.held.values())

    def cap_text(self) -> str:
        """The cap in words: ``$5`` and/or ``1000 tokens``."""
        return " and ".join(
            x
            for x in (
                f"${self.usd:g}" if self.usd is not None else "",
                f"{self.tokens} tokens" if self.tokens is not None else "",
            )
            if x
        )

    def state(self) -> dict[str, Any]:
        return {
            "usd": self.usd,
            "tokens": self.tokens,
            "spent_usd": round(self.spent_usd, 6),
            "spent_tokens": self.spent_tokens,
            "exhausted": self.exhausted,
        }


def spent_before(run: RunRecord) -> tuple[float, int]:
    """USD and tokens the runs ``run`` retries spent (recorded at its admission, R2)."""
    before = run.settings.spent_before
    return before.usd, before.tokens


def spent_by(store: Store, run: RunRecord) -> tuple[float, int]:
    """USD and tokens a run's budget has used: its own ledger plus what the runs it
    retries spent (recorded at admission, R2)."""
    usd, tokens = spent_before(run)
    for row in store.usage_totals([run.id]):
        usd += float(row.cost_usd or 0.0)
        tokens += int(
            (row.input_tokens or 0)
            + (row.cached_tokens or 0)
            + (row.cache_write_tokens or 0)
            + (row.output_tokens or 0)
        )
    return usd, tokens


class RunLedger:
    """What a run has spent, read again and again while other processes add to it (worker
    mode reads before every reservation), at a cost that does not grow with the run.

    Usage rows up to a *settled* id are summed once and kept; each read sums the rows
    after it. Ids come from one sequence in insertion order, and the transaction that
    drew an id ends within seconds (the store ends sessions idle in a transaction after
    10 s), so once ``settle`` seconds have passed by the database's clock since a read saw
    largest id ``M``, every row with an id up to ``M`` is committed or gone for good.
    """

    def __init__(self, store: Store, run: RunRecord, *, settle: float = 60.0) -> None:
        self.store = store
        self.run_id = str(run.id)
        self.base_usd, self.base_tokens = spent_before(run)
        self.base_id = 0
        self.settle = settle
        self.marks: deque[tuple[float, int]] = deque()
        """(database time, largest id seen) of earlier reads, oldest first, about 1 s apart."""
        self.now = 0.0

    def read(self) -> tuple[float, int]:
        cut = self.base_id
        while self.marks and self.marks[0][0] <= self.now - self.settle:
            cut = max(cut, self.marks.popleft()[1])
        usd_in, tokens_in, usd, tokens, top, now = self.store.run_spending(
            self.run_id, after_id=self.base_id, upto_id=cut
        )
        self.base_usd += usd_in
        self.base_tokens += tokens_in
        self.base_id = cut
        self.now = now
        if top > cut and (not self.marks or now - self.marks[-1][0] >= 1.0):
            self.marks.append((now, top))
        return self.base_usd + usd, self.base_tokens + tokens
