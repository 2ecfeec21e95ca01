"""What a provider bills in a batch agac does not read: its ledger rows.

A batch that ended failed, expired or cancelled (B7), and one agac gives up (B0 unneeded,
B11 ``batch_deadline``, ``--fresh``, ``agac cancel``, ``agac retry --abandon-in-flight``),
is never read, yet the provider bills the requests it answered (an expired OpenAI batch
bills what it completed; an ended batch bills every answer). Those answers are counted in
the cost ledger as their own origin, ``unread``, at the batch tier, attributed to the run
that submitted the batch, one row per answered request, from what the batch reports
(``Provider.billed_work``: no answer is taken, and which requests were answered is not
kept, so the rows name no unit):

- with the batch's total usage where the provider reports it (OpenAI's batch ``usage``,
  the usage of Gemini's responses), shared evenly between the rows (usage status ``ok``);
- otherwise at the worst case of the batch's largest waiting requests (``ceil(chars /
  4)`` input tokens and ``max_tokens`` output, as a budget reservation; usage status
  ``estimated``).

Only as many requests as are still ``pending`` are billed: the rows are written in the
transaction that fails those items (``Store.end_batch_unread``), so a batch is billed
once however often a run is interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agac.engine.limits.budget import request_estimate
from agac.jsontext import loads
from agac.providers.base import BilledWork, Usage
from agac.store.batches import sent_items
from agac.store.rows import UsageRow

if TYPE_CHECKING:
    from agac.providers.pricing import PriceTable
    from agac.store.values import BatchItem, BatchRecord

__all__ = ["UNREAD_ORIGIN", "unread_rows"]

UNREAD_ORIGIN = "unread"
"""The ledger origin of answers billed in a batch agac does not read."""


def unread_rows(
    b: BatchRecord, items: Sequence[BatchItem], work: BilledWork, prices: PriceTable, now: float
) -> list[UsageRow]:
    """The ledger rows of what ``work`` says the provider billed in batch ``b``, at most
    one per line of ``items`` still ``pending`` (identical requests are one line, S5)."""
    pending = list(sent_items(i for i in items if i.status == "pending"))
    n = min(work.answered, len(pending))
    if n <= 0:
        return []
    if work.usage is not None:
        return [
            _row(b, pending[i], share, prices, now, "ok")
            for i, share in enumerate(_shares(work.usage, work.answered, n))
        ]
    worst = sorted(pending, key=_tokens, reverse=True)[:n]
    return [_row(b, item, _worst(item), prices, now, "estimated") for item in worst]


def _shares(total: Usage, answered: int, n: int) -> list[Usage]:
    """``n`` of ``answered`` requests' even shares of ``total`` (the first ones take the
    remainders, so that ``n == answered`` sums to ``total`` exactly)."""

    def share(x: int, i: int) -> int:
        return x // answered + (1 if i < x % answered else 0)

    return [
        Usage(
            share(total.input_tokens, i),
            share(total.output_tokens, i),
            share(total.cached_tokens, i),
            share(total.cache_write_tokens, i),
            share(total.reasoning_tokens, i),
        )
        for i in range(n)
    ]


def _tokens(item: BatchItem) -> int:
    usage = _worst(item)
    return usage.input_tokens + usage.output_tokens


def _worst(item: BatchItem) -> Usage:
    request = loads(item.request)
    chars = sum(len(m["content"]) for m in request["messages"])
    input_tokens, output_tokens = request_estimate(chars, int(request["max_tokens"]))
    return Usage(input_tokens, output_tokens)


def _row(
    b: BatchRecord, item: BatchItem, usage: Usage, prices: PriceTable, now: float, status: str
) -> UsageRow:
    """One answered request of ``b``: its model and attempt from ``item``, but no unit."""
    request = loads(item.request)
    how = (
        "the batch's reported usage, shared between its answers"
        if status == "ok"
        else "estimated at the worst case of its requests"
    )
    return UsageRow(
        b.run_id,
        b.action,
        "",
        item.attempt,
        "llm",
        b.provider,
        request["model"],
        "batch",
        usage.input_tokens,
        usage.cached_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
        prices.cost(f"{b.provider}/{request['model']}", usage, "batch"),
        0.0,
        status,
        f"answered in batch {b.provider_batch_id} ({b.file}), which agac did not read; "
        f"usage: {how}",
        None,
        now,
        UNREAD_ORIGIN,
        usage.reasoning_tokens,
    )
