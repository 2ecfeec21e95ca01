"""Rate limits (RPM, TPM) and retry backoff.

:class:`RateLimiter` is a sliding one-minute window over requests and tokens: a
call waits until both budgets have room. Token counts are estimated before the
call (``ceil(chars / 4)`` of the prompt plus ``max_tokens``; DESIGN §3) and the
window is corrected with the provider's real usage afterwards.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque

__all__ = ["RateLimiter", "backoff_delay", "estimate_tokens"]


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def backoff_delay(
    attempt: int, *, initial: float, maximum: float, multiplier: float, jitter: bool
) -> float:
    """Exponential backoff after failed attempt ``attempt`` (1-based), full jitter."""
    delay = min(maximum, initial * multiplier ** max(attempt - 1, 0))
    return random.uniform(delay / 2, delay) if jitter else delay


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limit over a sliding 60 s window."""

    WINDOW = 60.0

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
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

    async def acquire(self, tokens: int) -> float:
        """Wait for room; returns the seconds waited."""
        if not self.rpm and not self.tpm:
            return 0.0
        waited = 0.0
        self._loop = asyncio.get_running_loop()
        async with self._lock:
            while True:
                now = time.monotonic()
                self._trim(now)
                wait = self._wait_time(now, tokens)
                if wait <= 0:
                    break
                waited += wait
                await asyncio.sleep(wait)
            now = time.monotonic()
            self._calls.append(now)
            self._tokens.append((now, tokens))
            self._token_sum += tokens
        return waited

    def settle(self, estimated: int, actual: int) -> None:
        """Correct the window with real usage (adds the difference now)."""
        if self.tpm and actual != estimated:
            delta = actual - estimated
            self._tokens.append((time.monotonic(), delta))
            self._token_sum += delta
