"""Time as agac reads it: one :class:`Clock`, injected wherever time decides something —
lease expiry (S3), run and batch deadlines (R4, B11), proposal expiry (A1), polling
intervals, rate windows — so that tests move time instead of sleeping through it.

The store holds the clock it stamps rows with (:class:`agac.store.repository.Store`);
a run takes its clock from its store, so one long-lived store handle built with a
:class:`ManualClock` moves a whole run, its approvals and its leases together.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["SYSTEM", "Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Wall time (epoch seconds, what the store records), a monotonic reading for
    intervals, and waiting."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    def wait(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` (outside an event loop)."""


class SystemClock:
    """The machine's clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM = SystemClock()


class ManualClock:
    """A clock that moves only when told to (:meth:`advance`) or when someone waits on it:
    a wait moves it forward by the time waited, at once. Starts at the machine's time
    so that what it stamps sorts with what was stamped before."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._mono = 0.0

    def time(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += seconds
        self._mono += seconds

    async def sleep(self, seconds: float) -> None:
        self.advance(max(seconds, 0.0))
        await asyncio.sleep(0)

    def wait(self, seconds: float) -> None:
        self.advance(max(seconds, 0.0))
