"""The run loop: walks of the run's records and batch steps until nothing moves.

A walk settles every unit it can; what is left waits on a batch, a person, an effect, or
the run stopped. With batch actions, a batch step follows (engine/batch/coordinator.py):
when it read results or failed records, the records are walked again; when nothing
moved, the run pauses (``waiting``, exit 75) — or, with ``--wait``, sleeps
``poll_interval`` and asks the providers again. A run that ended its last invocation
``waiting`` had walked every record and found nothing to do but wait on batches; only
batch time has passed since, so it asks the providers first and walks again only when
something was read.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from agac.engine.interrupts import install_interrupts
from agac.engine.lifecycle.leases import heartbeat
from agac.engine.values import Halt, PassResult
from agac.errors import LeaseLost, StoreError

if TYPE_CHECKING:
    from agac.engine.lifecycle.assembly import RunParts
    from agac.engine.values import RunControl

__all__ = ["drive", "held_lines", "install_interrupt", "next_pause"]


async def drive(
    parts: RunParts, *, wait: bool, was_waiting: bool, heartbeat_seconds: float
) -> PassResult | Halt:
    """Walk and step until the run completes, pauses, or is stopped; the lease is renewed
    every ``heartbeat_seconds`` meanwhile."""
    beat = asyncio.get_running_loop().create_task(
        heartbeat(parts.gateway, parts.store, parts.run.id, parts.control, heartbeat_seconds)
    )
    try:
        return await _passes(parts, wait=wait, was_waiting=was_waiting)
    finally:
        beat.cancel()
        try:
            await beat
        except (asyncio.CancelledError, LeaseLost, StoreError):
            pass  # a lost lease already stopped the run; a broken store stops it too (S2)


async def _passes(parts: RunParts, *, wait: bool, was_waiting: bool) -> PassResult | Halt:
    control, batch = parts.control, parts.batch
    waiting: list[str] = []
    step_first = was_waiting and batch is not None
    if batch is not None:
        await batch.close_settled()
        await batch.reconcile_given_up()
    while True:
        if not step_first:
            walked = await _walk(parts, waiting)
            if walked is not None:
                # B13: batches cancelled to go live hold nothing the run needs; the next
                # run of the workflow reads them (decision 0097)
                return walked
            if batch is None:  # only actions held for cheaper hours are left
                held = await _held(parts, wait=wait)
                if held is not None:
                    return held
                continue
        elif control.cancel_requested:
            return PassResult("cancelled", tuple(waiting))
        elif control.deadline_passed():
            return PassResult("timed_out", tuple(waiting))
        elif control.stopping:
            return PassResult("interrupted", tuple(waiting))
        assert batch is not None
        step_first = False
        await parts.gateway.flush()
        report = await batch.step(walked=parts.walk.walked)
        if control.stopping:
            return PassResult("interrupted", tuple(waiting))
        if report.progressed:
            continue
        if batch.refused_actions:
            return PassResult("failed_with_batches_out", tuple(waiting))
        report.waiting += parts.effects.waiting
        report.waiting += held_lines(control)
        for line in report.waiting:
            await parts.out.event("waiting", reason="batch", detail=line)
        approvals = await _approvals_waiting(parts)
        waiting = report.waiting + approvals
        if approvals and not await parts.gateway.call(
            parts.store.list_batches,
            parts.run.workflow,
            open_only=True,
            tenants=(parts.run.tenant,),
        ):
            return PassResult("awaiting_approval", tuple(waiting))  # B11: only people can move it
        if not wait:
            return PassResult("paused", tuple(waiting))
        if await control.sleep(next_pause(control, report.poll_interval)):
            # Ctrl-C while waiting between polls: stop waiting at once
            return PassResult("interrupted", tuple(waiting))
        step_first = True


def held_lines(control: RunControl) -> list[str]:
    """What waits for its model's cheaper hours (``run_mode: auto``), one line each."""
    return [
        f"{action}: waits for its model's cheaper hours, starting {_utc(at)}"
        for action, at in control.held_actions().items()
    ]


def _utc(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def _held(parts: RunParts, *, wait: bool) -> PassResult | None:
    """A run without batch actions whose walk left only held actions: paused (``waiting``)
    naming them, or with ``--wait`` asleep until the first of them starts (None: walk
    again)."""
    lines = tuple(held_lines(parts.control))
    for line in lines:
        await parts.out.event("waiting", reason="cheaper_hours", detail=line)
    await parts.gateway.flush()
    if not wait:
        return PassResult("paused", lines)
    if await parts.control.sleep(next_pause(parts.control, float("inf"))):
        return PassResult("interrupted", lines)
    return None


def next_pause(control: RunControl, poll_interval: float) -> float:
    """How long ``--wait`` sleeps before the next poll: ``poll_interval``, cut short by
    the run's deadline (R4), by the instant a hybrid action goes live (B13) and by the
    instant an action held for cheaper hours starts."""
    now = control.clock.time()
    ends = [at for at in (control.deadline_at, control.next_live_at()) if at is not None]
    return max(0.0, min([poll_interval, *(at - now for at in ends)]))


async def _walk(parts: RunParts, waiting: list[str]) -> PassResult | Halt | None:
    """One walk of the records; the loop's result when the walk decides it, else None (a
    batch step follows)."""
    control, approvals = parts.control, parts.approvals
    if approvals is not None:
        approvals.begin_pass()
    parts.effects.waiting.clear()
    complete = await parts.walk.walk()
    if control.cancel_requested:
        return PassResult("cancelled", tuple(waiting))
    if approvals is not None and approvals.halt is not None:
        return approvals.halt
    if complete:
        return PassResult("complete", tuple(waiting))
    if control.deadline_passed():
        return PassResult("timed_out", tuple(waiting))
    if control.stopping:
        return PassResult("interrupted", tuple(waiting))
    if parts.batch is not None:
        return None
    people = await _approvals_waiting(parts)
    if not parts.effects.waiting and not people and control.held_actions():
        return None  # only actions held for their model's cheaper hours are left
    if not parts.effects.waiting and not people:
        return PassResult("interrupted", tuple(waiting))
    await parts.gateway.flush()
    lines = tuple(parts.effects.waiting) + tuple(people)  # E2, A1: people
    return PassResult("awaiting_approval" if people else "paused", lines)


async def _approvals_waiting(parts: RunParts) -> list[str]:
    """What units wait on people's decisions (A1), reported once as ``waiting approval``."""
    if parts.approvals is None:
        return []
    lines = parts.approvals.waiting_lines()
    for line in lines:
        await parts.out.event("waiting", reason="approval", detail=line)
    return lines


def install_interrupt(control: RunControl) -> Callable[[], None]:
    """First Ctrl-C (or SIGTERM): stop sending and waiting, settle what is in flight.
    Second: stop at once (engine/interrupts.py)."""

    def first() -> None:
        control.stop()
        print(
            "\nstopping: settling calls in flight (Ctrl-C again to stop at once)",
            file=sys.stderr,
            flush=True,
        )

    return install_interrupts(first, (signal.SIGINT, signal.SIGTERM))
