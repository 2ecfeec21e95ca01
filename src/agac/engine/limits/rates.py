"""Rate limits (RPM, TPM) and retry backoff.

:class:`RateLimiter` is a sliding one-minute window over requests and tokens: a
call waits until both budgets have room. Token counts are estimated before the
call (``ceil(chars / 4)`` of the prompt plus ``max_tokens``; docs/workflow-reference.md) and the
window is corrected with the provider's real usage afterwards.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from agac.clock import SYSTEM, Clock
from agac.engine.interrupts import StopSignal

if TYPE_CHECKING:
    from agac.config.model import Action

__all__ = [
    "RateLimiter",
    "RateWindow",
    "Slots",
    "backoff_delay",
    "batch_providers",
    "connections_by_provider",
    "estimate_tokens",
]


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def backoff_delay(
    attempt: int, *, initial: float, maximum: float, multiplier: float, jitter: bool
) -> float:
    """Exponential backoff after failed attempt ``attempt`` (1-based), full jitter."""
    delay = min(maximum, initial * multiplier ** max(attempt - 1, 0))
    return random.uniform(delay / 2, delay) if jitter else delay


class Slots:
    """An action's ``max_concurrency`` slots: a FIFO semaphore that hands a released slot
    straight to the next waiter.

    ``asyncio.Semaphore`` (3.11) wakes a waiter by scanning its queue past every waiter
    already woken but not yet running, and removes each from the middle of a deque: when
    a group commit frees 64 slots at once, that is thousands of steps per wave. Here a
    release pops the next live waiter and gives it the slot, O(1); a waiter cancelled
    while queued is skipped, one cancelled after it was handed a slot passes it on.
    """

    def __init__(self, value: int) -> None:
        if value < 1:
            raise ValueError("slots must be at least 1")
        self._free = value
        self._waiters: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        return self._free == 0

    async def acquire(self) -> bool:
        if self._free > 0:
            self._free -= 1
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # handed a slot, then cancelled before using it
            raise
        return True

    def release(self) -> None:
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot passes to it; ``_free`` stays as it is
                return
        self._free += 1

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class RateWindow(Protocol):
    """A rate window an action's calls go through: in this process (:class:`RateLimiter`)
    or in the store, shared by every worker (engine/workers/rates.py)."""

    active: bool
    """False when it limits nothing (no ``rate_limit``): calls skip it."""

    async def acquire(self, tokens: int, stop: StopSignal | None = None) -> float | None:
        """Wait for room; the seconds waited, or None when ``stop`` was set meanwhile."""

    def settle(self, estimated: int, actual: int) -> None:
        """A call's actual tokens in place of the estimate it took."""

    def loop_bound_elsewhere(self) -> bool: ...


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limit over a sliding 60 s window."""

    WINDOW = 60.0

    def __init__(self, rpm: float | None, tpm: float | None, clock: Clock = SYSTEM) -> None:
        self.clock = clock
        self.rpm = rpm
        self.tpm = tpm
        self._calls: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._token_sum = 0
        self._lock = asyncio.Lock()
        self.active = bool(rpm or tpm)
        self._loop: asyncio.AbstractEventLoop | None = None

    def loop_bound_elsewhere(self) -> bool:
        """True when this limiter was used on an event loop that is not the running one
        (a new run in the same process gets a fresh window)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        return self._loop is not None and self._loop is not running

    def _trim(self, now: float) -> None:
        edge = now - self.WINDOW
        while self._calls and self._calls[0] <= edge:
            self._calls.popleft()
        while self._tokens and self._tokens[0][0] <= edge:
            self._token_sum -= self._tokens.popleft()[1]

    def _wait_time(self, now: float, tokens: int) -> float:
        wait = 0.0
        if self.rpm and len(self._calls) >= self.rpm:
            wait = max(wait, self._calls[0] + self.WINDOW - now)
        if self.tpm and self._tokens and self._token_sum + tokens > self.tpm:
            need = self._token_sum + tokens - self.tpm
            freed = 0
            for ts, n in self._tokens:
                freed += n
                if freed >= need:
                    wait = max(wait, ts + self.WINDOW - now)
                    break
        return wait

    async def acquire(self, tokens: int, stop: StopSignal | None = None) -> float | None:
        """Wait for room; returns the seconds waited, or None when ``stop`` was set while
        waiting (nothing is taken from the window then)."""
        if not self.rpm and not self.tpm:
            return 0.0
        waited = 0.0
        self._loop = asyncio.get_running_loop()
        async with self._lock:
            while True:
                now = self.clock.monotonic()
                self._trim(now)
                wait = self._wait_time(now, tokens)
                if wait <= 0:
                    break
                waited += wait
                if stop is None:
                    await self.clock.sleep(wait)
                elif await stop.sleep(wait):
                    return None
            now = self.clock.monotonic()
            self._calls.append(now)
            self._tokens.append((now, tokens))
            self._token_sum += tokens
        return waited

    def settle(self, estimated: int, actual: int) -> None:
        """Correct the window with real usage (adds the difference now)."""
        if self.tpm and actual != estimated:
            delta = actual - estimated
            self._tokens.append((self.clock.monotonic(), delta))
            self._token_sum += delta


def connections_by_provider(actions: Iterable[Action]) -> dict[str, int]:
    """How many connections each provider's HTTP client may open: the summed
    ``max_concurrency`` of the llm actions that call it (each action bounds its own calls,
    and they may all be in flight at once)."""
    out: dict[str, int] = {}
    for action in actions:
        if action.kind == "llm" and action.provider:
            out[action.provider] = out.get(action.provider, 0) + max(1, action.max_concurrency)
    return out


def batch_providers(actions: Iterable[Action]) -> set[str]:
    """The providers that llm actions with ``run_mode: batch`` call."""
    return {a.provider for a in actions if a.kind == "llm" and a.provider and a.run_mode == "batch"}
