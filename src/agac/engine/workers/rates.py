"""What workers share through the store instead of in memory: rate windows (one sliding
window per key in the store, so every worker sees one limit), a run's budget ledger
(what every worker has spent), and concurrency (``--concurrency`` over every action's
slots in this worker)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from agac.config.variables import RATE_WINDOW

if TYPE_CHECKING:
    from agac.engine.interrupts import StopSignal
    from agac.engine.limits.budget import BudgetGuard, Reservation, RunLedger
    from agac.engine.limits.rates import Slots
    from agac.store.repository import Store

__all__ = ["SharedSpending", "StoreRateLimiter", "WorkerSlots", "rate_window"]


def rate_window() -> float:
    """The global window: a minute plus a second, as requests admitted a minute apart can
    reach the provider in a different order, and the provider's own window must never see
    more. (``AGAC_RATE_WINDOW_SECONDS`` shortens the minute for tests against an emulator
    whose own window is shortened the same way; checked, ConfigError naming it.)"""
    found = RATE_WINDOW.from_environment("AGAC_RATE_WINDOW_SECONDS", os.environ)
    return (found if found is not None else 60.0) + 1.0


class StoreRateLimiter:
    """The :class:`agac.engine.limits.RateLimiter` interface over a window in the store, so
    that every worker on the store shares one limit per key."""

    def __init__(self, store: Store, key: str, rpm: float | None, tpm: float | None) -> None:
        self.store = store
        self.key = key
        self.rpm = rpm
        self.tpm = tpm
        self.active = bool(rpm or tpm)

    async def acquire(self, tokens: int, stop: StopSignal | None = None) -> float | None:
        """Wait for room; the seconds waited, or None when ``stop`` was set meanwhile."""
        waited = 0.0
        while True:
            if stop is not None and stop.is_set:
                return None
            wait = await asyncio.to_thread(
                self.store.rate_take,
                self.key,
                window=rate_window(),
                rpm=self.rpm,
                tpm=self.tpm,
                tokens=tokens,
            )
            if wait <= 0:
                return waited
            wait = min(wait, 2.0)  # others may have taken less than they asked: look again
            waited += wait
            if stop is None:
                await self.store.clock.sleep(wait)
            elif await stop.sleep(wait):
                return None

    def settle(self, estimated: int, actual: int) -> None:
        if self.tpm and actual != estimated:
            self.store.rate_adjust(self.key, actual - estimated)

    def loop_bound_elsewhere(self) -> bool:
        return False


class SharedSpending:
    """The ledger read of an online shard's budget guard: what the run has spent (every
    worker's committed usage) and, about once a second, the batches it has out and
    whether a batch part was refused — another worker's batch shard may have submitted
    or refused one since this shard started."""

    BATCHES_EVERY = 1.0

    def __init__(
        self,
        ledger: RunLedger,
        store: Store,
        run_id: str,
        batches: Callable[[BudgetGuard, dict[str, Reservation]], dict[str, Reservation]] | None,
    ) -> None:
        self.ledger = ledger
        self.store = store
        self.run_id = run_id
        self.batches = batches
        """The run's batches out, reserved at the guard's prices (the known ones as given),
        or None when it has no batch action."""
        self.batches_at = store.clock.monotonic()

    async def read(self, guard: BudgetGuard) -> tuple[float, int]:
        spent = await asyncio.to_thread(self.ledger.read)
        clock = self.store.clock
        if self.batches is not None and clock.monotonic() - self.batches_at >= self.BATCHES_EVERY:
            self.batches_at = clock.monotonic()
            held = await asyncio.to_thread(self.batches, guard, guard.held)
            guard.replace_held(held)
            if await asyncio.to_thread(self.store.budget_refused, self.run_id):
                guard.exhausted = True
        return spent


class WorkerSlots:
    """An action's own slots and the worker's, taken together (action first)."""

    def __init__(self, own: Slots, shared: Slots) -> None:
        self.own = own
        self.shared = shared

    async def acquire(self) -> bool:
        await self.own.acquire()
        try:
            await self.shared.acquire()
        except BaseException:
            self.own.release()
            raise
        return True

    def release(self) -> None:
        self.shared.release()
        self.own.release()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()
