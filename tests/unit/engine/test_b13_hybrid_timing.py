"""B13: the instant a hybrid action goes live — when ``agac run --wait`` wakes up for it,
and what the run control says before and after the switch."""

from __future__ import annotations

from agac.engine.lifecycle.loop import next_pause
from agac.engine.values import RunControl
from agac.testing import ManualClock


def test_b13_wait_wakes_up_at_live_after_not_only_at_poll_interval() -> None:
    clock = ManualClock()
    now = clock.time()
    control = RunControl(clock, now + 3600, {"classify": now + 20})

    assert 19 <= next_pause(control, 300) <= 20  # not the 5 minutes of poll_interval
    assert not control.live_due("classify")
    clock.advance(21)
    assert control.live_due("classify")
    control.go_live("classify")
    assert control.is_live("classify") and not control.live_due("classify")
    assert next_pause(control, 300) == 300  # switched: back to poll_interval


def test_b13_deadline_still_cuts_the_pause_short() -> None:
    clock = ManualClock()
    now = clock.time()
    control = RunControl(clock, now + 10, {"classify": now + 5}, live=["classify"])

    assert control.is_live("classify") and control.next_live_at() is None
    assert 9 <= next_pause(control, 300) <= 10
