"""Slowing repeated failed sign-ins (T1).

Every attempt is counted as a failure *before* its password is checked and refunded if the
password turns out right, so attempts sent at once cannot all slip in under the count. Past
a few failures on a user name, every further attempt on that name waits before it is even
checked — 1 s, 2 s, 4 s … up to a cap — whether its password is right or not, so guessing
gets slow without telling the guesser anything. Failures from one client address are
counted too, but they slow only *failed* attempts from that address (the wrong answer comes
late), never a right password of another user signing in from the same address (a shared
office address, a proxy). Attempts in flight are bounded per name and per address: one
beyond the bound is refused at once, unchecked, so concurrency buys a guesser nothing. A
success clears the name's count. The counts live in the service process (one ``agac serve``
per store; see docs/decisions/0004-slow-failed-sign-ins-in-process.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Attempt", "LoginThrottle"]


@dataclass(frozen=True)
class Attempt:
    """One admitted sign-in attempt; hand it back to :meth:`LoginThrottle.end`."""

    name_key: str
    address_key: str
    before: float
    """Seconds to wait before the password is checked (the name's count)."""
    address_wait: float
    """Seconds a *failed* attempt waits in all before its answer (the address's count)."""

    @property
    def after_failure(self) -> float:
        """Seconds a failed attempt waits after its check, on top of ``before``."""
        return max(0.0, self.address_wait - self.before)


class LoginThrottle:
    def __init__(
        self,
        *,
        free: int = 5,
        window: float = 900.0,
        cap: float = 30.0,
        clock: Callable[[], float] = time.time,
        max_keys: int = 100_000,
        per_name: int = 2,
        per_address: int = 8,
    ) -> None:
        self.free = free
        self.window = window
        self.cap = cap
        self.clock = clock
        self.max_keys = max_keys
        self.per_name = per_name
        """Attempts on one name in flight at once; more are refused unchecked."""
        self.per_address = per_address
        """Attempts from one address in flight at once; more are refused unchecked."""
        self._failures: dict[str, tuple[int, float]] = {}
        """key -> (failures in the window, time of the last one)."""
        self._in_flight: dict[str, int] = {}
        self._lock = threading.Lock()

    def begin(self, name: str, address: str) -> Attempt | None:
        """Admit one attempt, counted as failed until :meth:`end` says otherwise; None when
        too many attempts on this name or from this address are already in flight."""
        name_key, address_key = f"name:{name.lower()}", f"addr:{address}"
        with self._lock:
            if (
                self._in_flight.get(name_key, 0) >= self.per_name
                or self._in_flight.get(address_key, 0) >= self.per_address
            ):
                return None
            now = self.clock()
            attempt = Attempt(
                name_key,
                address_key,
                self._wait(self._count(name_key, now)),
                self._wait(self._count(address_key, now)),
            )
            if len(self._failures) >= self.max_keys:
                self._forget(now)
            for key in (name_key, address_key):
                self._in_flight[key] = self._in_flight.get(key, 0) + 1
                self._failures[key] = (self._count(key, now) + 1, now)
            return attempt

    def end(self, attempt: Attempt, *, ok: bool) -> None:
        """The attempt's check is over: a right password clears the name's count and takes
        its own failure back from the address's; a wrong one stays counted."""
        with self._lock:
            for key in (attempt.name_key, attempt.address_key):
                left = self._in_flight.get(key, 0) - 1
                if left > 0:
                    self._in_flight[key] = left
                else:
                    self._in_flight.pop(key, None)
            if ok:
                self._failures.pop(attempt.name_key, None)
                count, last = self._failures.get(attempt.address_key, (0, 0.0))
                if count > 1:
                    self._failures[attempt.address_key] = (count - 1, last)
                else:
                    self._failures.pop(attempt.address_key, None)

    def _count(self, key: str, now: float) -> int:
        count, last = self._failures.get(key, (0, 0.0))
        return count if now - last < self.window else 0

    def _wait(self, count: int) -> float:
        over = count - self.free
        return 0.0 if over < 0 else min(2.0**over, self.cap)

    def _forget(self, now: float) -> None:
        for key, (_, last) in list(self._failures.items()):
            if now - last >= self.window:
                del self._failures[key]
        if len(self._failures) >= self.max_keys:  # a flood inside one window: keep the newest
            newest = sorted(self._failures.items(), key=lambda kv: kv[1][1])[self.max_keys // 2 :]
            self._failures = dict(newest)
