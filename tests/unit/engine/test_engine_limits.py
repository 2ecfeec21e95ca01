"""Rate limits and backoff (docs/providers.md): the window is shortened so tests run in ms."""

from __future__ import annotations

import asyncio
import time

from hypothesis import given
from hypothesis import strategies as st

from agac.engine.limits.rates import RateLimiter, backoff_delay, estimate_tokens


def test_rpm_limit_spreads_calls_over_the_window() -> None:
    async def go() -> list[float]:
        limiter = RateLimiter(rpm=5, tpm=None)
        limiter.WINDOW = 0.3
        stamps = []
        for _ in range(12):
            await limiter.acquire(1)
            stamps.append(time.monotonic())
        return stamps

    stamps = asyncio.run(go())
    for i in range(5, 12):
        assert stamps[i] - stamps[i - 5] >= 0.29  # never more than 5 in any window


def test_tpm_limit_waits_for_tokens_and_settles_actual_usage() -> None:
    async def go() -> float:
        limiter = RateLimiter(rpm=None, tpm=100)
        limiter.WINDOW = 0.3
        await limiter.acquire(80)
        limiter.settle(80, 30)  # the provider reported less than the estimate
        t0 = time.monotonic()
        await limiter.acquire(60)  # the window holds 30 tokens, so 60 more fit at once
        return time.monotonic() - t0

    assert asyncio.run(go()) < 0.1


def test_unlimited_limiter_never_waits() -> None:
    limiter = RateLimiter(None, None)
    assert not limiter.active
    assert asyncio.run(limiter.acquire(10**9)) == 0.0


@given(
    st.integers(min_value=1, max_value=30),
    st.floats(min_value=0.001, max_value=5),
    st.floats(min_value=1, max_value=120),
)
def test_backoff_is_bounded_and_jittered(attempt: int, initial: float, maximum: float) -> None:
    d = backoff_delay(attempt, initial=initial, maximum=maximum, multiplier=2.0, jitter=True)
    top = min(maximum, initial * 2 ** (attempt - 1))
    assert top / 2 <= d <= top


def test_token_estimate_without_a_tokenizer() -> None:
    assert estimate_tokens(0) == 0
    assert estimate_tokens(1) == 1
    assert estimate_tokens(400) == 100


# -- Slots: max_concurrency, handed over in order -------------------------------------------


def test_slots_bound_concurrency_and_hand_over_in_arrival_order() -> None:
    from agac.engine.limits.rates import Slots

    async def main() -> tuple[int, list[int]]:
        slots = Slots(3)
        running = peak = 0
        order: list[int] = []

        async def unit(i: int) -> None:
            nonlocal running, peak
            async with slots:
                order.append(i)
                running += 1
                peak = max(peak, running)
                await asyncio.sleep(0.001 * (i % 4))
                running -= 1

        await asyncio.gather(*(unit(i) for i in range(40)))
        return peak, order

    peak, order = asyncio.run(main())
    assert peak == 3
    assert order == list(range(40))  # FIFO: nobody overtakes a waiter


def test_slots_survive_cancelled_waiters_and_cancelled_holders() -> None:
    from agac.engine.limits.rates import Slots

    async def main() -> int:
        slots = Slots(1)
        await slots.acquire()
        queued = asyncio.ensure_future(slots.acquire())
        handed = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0)
        queued.cancel()  # cancelled while waiting: skipped by release
        await asyncio.sleep(0)
        slots.release()  # goes to ``handed``
        handed.cancel()  # cancelled after it was handed the slot: passes it on
        await asyncio.gather(handed, return_exceptions=True)
        assert not slots.locked()
        got = 0
        for _ in range(5):
            async with slots:
                got += 1
        return got

    assert asyncio.run(main()) == 5


def test_p1_connections_by_provider_sums_max_concurrency() -> None:
    from types import SimpleNamespace

    from agac.engine.limits.rates import connections_by_provider

    actions = [
        SimpleNamespace(kind="llm", provider="openai", max_concurrency=4),
        SimpleNamespace(kind="llm", provider="openai", max_concurrency=3),
        SimpleNamespace(kind="llm", provider="anthropic", max_concurrency=64),
        SimpleNamespace(kind="tool", provider=None, max_concurrency=8),
    ]
    assert connections_by_provider(actions) == {"openai": 7, "anthropic": 64}


def test_batch_providers_names_the_providers_of_batch_actions() -> None:
    from types import SimpleNamespace

    from agac.engine.limits.rates import batch_providers

    actions = [
        SimpleNamespace(kind="llm", provider="openai", run_mode="online"),
        SimpleNamespace(kind="llm", provider="anthropic", run_mode="batch"),
        SimpleNamespace(kind="tool", provider=None, run_mode=None),
    ]
    assert batch_providers(actions) == {"anthropic"}
