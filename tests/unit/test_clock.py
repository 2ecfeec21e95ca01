"""The injected clock: a ManualClock moves what time() and monotonic() read without sleeping."""

from __future__ import annotations

import time

from agac.clock import SYSTEM, ManualClock


def test_manual_clock_moves_forward_on_request() -> None:
    clock = ManualClock()
    before, mono = clock.time(), clock.monotonic()
    clock.advance(3600)
    assert clock.time() - before >= 3600
    assert clock.monotonic() - mono >= 3600
    assert clock.time() - time.time() >= 3599  # ahead of the machine by what was moved


def test_system_clock_is_the_machines() -> None:
    assert abs(SYSTEM.time() - time.time()) < 1
