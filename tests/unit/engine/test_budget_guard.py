"""R5: a budget guard that shares its run with other processes (worker mode) reads the
run's ledger before each reservation, so what others spent counts against the cap."""

from __future__ import annotations

import asyncio

import pytest

from agac.engine.limits.budget import BudgetGuard, Reservation, within_cap
from agac.providers.pricing import PriceTable

CALL = Reservation(usd=0.25, tokens=10)


def _guard(ledger: list[float]) -> tuple[BudgetGuard, list[int]]:
    reads: list[int] = []

    async def read() -> tuple[float, int]:
        reads.append(1)
        await asyncio.sleep(0.01)
        return ledger[0], 0

    return BudgetGuard(1.0, None, PriceTable(), ledger=read), reads


async def test_r5_shared_guard_counts_what_other_workers_spent() -> None:
    ledger = [0.0]
    guard, _ = _guard(ledger)
    await guard.refresh()
    assert guard.reserve(CALL)
    guard.settle(CALL, 0.25, 10)  # this guard's call, committed to the ledger
    ledger[0] = 0.25 + 0.5  # ... and another worker spent $0.50 meanwhile
    await guard.refresh()
    assert guard.spent_usd == pytest.approx(0.75)
    assert guard.reserve(CALL)
    assert not guard.reserve(CALL)  # $1.25 would cross the $1 cap
    assert guard.exhausted


async def test_r5_shared_guard_keeps_own_settlements_the_read_may_not_hold() -> None:
    ledger = [0.0]
    guard, _ = _guard(ledger)
    assert guard.reserve(CALL)
    reading = asyncio.get_running_loop().create_task(guard.refresh())
    await asyncio.sleep(0)  # the read started before this settlement was committed
    guard.settle(CALL, 0.25, 10)
    await reading
    assert guard.spent_usd == pytest.approx(0.25)


async def test_r5_shared_guard_coalesces_concurrent_reads() -> None:
    ledger = [0.1]
    guard, reads = _guard(ledger)
    await asyncio.gather(*(guard.refresh() for _ in range(20)))
    assert len(reads) == 1  # one read served every reservation that waited at once
    assert guard.spent_usd == pytest.approx(0.1)


async def test_r5_shared_guard_read_failure_reaches_every_waiter() -> None:
    async def broken() -> tuple[float, int]:
        await asyncio.sleep(0.01)
        raise OSError("store unreachable")

    guard = BudgetGuard(1.0, None, PriceTable(), ledger=broken)
    results = await asyncio.gather(*(guard.refresh() for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)


async def test_r5_guard_without_ledger_reads_nothing() -> None:
    guard = BudgetGuard(1.0, None, PriceTable())
    await guard.refresh()
    assert guard.spent_usd == 0.0


@pytest.mark.parametrize("usd", [float("nan"), float("inf")])
def test_i35_13_a_cost_that_is_not_finite_is_over_every_budget(usd: float) -> None:
    """A comparison with NaN is always false: a NaN cost must not pass as "under the cap"."""
    guard = BudgetGuard(5.0, None, PriceTable())
    assert not guard.reserve(Reservation(usd=usd, tokens=1))
    assert guard.exhausted

    spent = BudgetGuard(5.0, None, PriceTable(), spent_usd=usd)
    assert not spent.reserve(Reservation(usd=0.0, tokens=0))

    assert not within_cap(usd, 5.0) and not within_cap(usd, float("inf"))
    assert within_cap(5.0, 5.0) and not within_cap(5.01, 5.0)


def test_i40_web_search_a_budget_reserves_the_searches_of_a_call() -> None:
    from agac.config.model import Action
    from agac.providers.base import Message, Request
    from agac.providers.servertools import WebSearch

    prices = PriceTable()
    guard = BudgetGuard(1.0, None, prices)
    model = "anthropic/claude-sonnet-4-5"
    action = Action(name="a", kind="llm", model=model)
    plain = Request("anthropic", "claude-sonnet-4-5", (Message("user", "x" * 400),), 100)
    searched = Request(
        "anthropic",
        "claude-sonnet-4-5",
        (Message("user", "x" * 400),),
        100,
        web_search=WebSearch(max_uses=5),
    )
    base = guard.for_request(action, plain).usd
    # Five searches at $10 per 1,000 on top of the tokens, live and in a batch line.
    assert guard.for_request(action, searched).usd == pytest.approx(base + 0.05)
    line = {"messages": [{"content": "x" * 400}], "max_tokens": 100, "web_search": {}}
    batch = guard.for_request_json(action, {**line, "web_search": None}, "batch").usd
    assert guard.for_request_json(action, line, "batch").usd == pytest.approx(batch + 0.01)
