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
    """The machine's clock, moved forward on request: :meth:`advance` shifts what
    :meth:`time` and :meth:`monotonic` read, so a test makes a lease expire, a proposal
    lapse or a deadline pass without sleeping through it. Waits still take real time
    (they are short in tests: backoffs, heartbeats, polls), so a run under this clock
    behaves as under the system's, only later."""

    def __init__(self) -> None:
        self._offset = 0.0

    def time(self) -> float:
        return time.time() + self._offset

    def monotonic(self) -> float:
        return time.monotonic() + self._offset

    def advance(self, seconds: float) -> None:
        self._offset += seconds

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)
