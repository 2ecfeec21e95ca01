"""Slowing repeated failed sign-ins (T1).

Failures are counted per user name and per client address over a window; past a few,
every further attempt on that name or from that address waits before it is even checked
— 1 s, 2 s, 4 s … up to a cap — whether its password is right or not, so guessing gets
slow without telling the guesser anything. A success clears the name's count. The counts
live in the service process (one ``agac serve`` per store; see
docs/decisions/0004-slow-failed-sign-ins-in-process.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

__all__ = ["LoginThrottle"]


class LoginThrottle:
    def __init__(
        self,
        *,
        free: int = 5,
        window: float = 900.0,
        cap: float = 30.0,
        clock: Callable[[], float] = time.time,
        max_keys: int = 100_000,
    ) -> None:
        self.free = free
        self.window = window
        self.cap = cap
        self.clock = clock
        self.max_keys = max_keys
        self._failures: dict[str, tuple[int, float]] = {}
        """key -> (failures in the window, time of the last one)."""

    def delay(self, keys: Iterable[str]) -> float:
        """Seconds the next attempt on any of ``keys`` waits before it is checked."""
        now = self.clock()
        worst = 0
        for key in keys:
            count, last = self._failures.get(key, (0, 0.0))
            if now - last < self.window:
                worst = max(worst, count)
        over = worst - self.free
        return 0.0 if over < 0 else min(2.0**over, self.cap)

    def failed(self, keys: Iterable[str]) -> None:
        now = self.clock()
        if len(self._failures) >= self.max_keys:
            self._forget(now)
        for key in keys:
            count, last = self._failures.get(key, (0, 0.0))
            self._failures[key] = (count + 1 if now - last < self.window else 1, now)

    def succeeded(self, key: str) -> None:
        self._failures.pop(key, None)

    def _forget(self, now: float) -> None:
        for key, (_, last) in list(self._failures.items()):
            if now - last >= self.window:
                del self._failures[key]
        if len(self._failures) >= self.max_keys:  # a flood inside one window: keep the newest
            newest = sorted(self._failures.items(), key=lambda kv: kv[1][1])[self.max_keys // 2 :]
            self._failures = dict(newest)
