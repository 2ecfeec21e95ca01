"""The dispatch marks' bookkeeping (engine/outcomes/marks.py), against a gateway whose group
commits the test makes durable by hand: a unit is sent only once a durable mark row
lists it; rows list at most the slot holders and the next 2 x max_concurrency units;
and a row is written about once per max_concurrency sends, not once per send."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agac.engine.outcomes.dispatch import Dispatch
from agac.engine.outcomes.marks import DispatchMarks, ShardIndex
from agac.providers.base import Message, Request
from agac.providers.pricing import PriceTable


class Gateway:
    """Group commits that become durable when the test says so."""

    def __init__(self) -> None:
        self.groups: list[tuple[list[Any], asyncio.Future[None]]] = []
        self.durable: dict[tuple[str, str], set[str]] = {}

    def commit_nowait(self, **parts: list[Any]) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.groups.append((parts.get("marks", []), fut))
        return fut

    def make_durable(self) -> None:
        for rows, fut in self.groups:
            if not fut.done():
                for row in rows:
                    self.durable[(row.action, row.shard)] = {u[0] for u in json.loads(row.units)}
                fut.set_result(None)

    def listed(self) -> set[str]:
        return set().union(*self.durable.values()) if self.durable else set()


class _Pool:
    def release(self) -> None:
        pass


def _entry(marks: DispatchMarks, mc: int, key: str, seq: int, fp: str) -> Dispatch:
    """A unit's call as the call path builds it (one per unit, its request ``key``'s)."""
    return Dispatch(_Pool(), marks, "a", mc, key, seq, fp, _request(key))


def _request(key: str) -> Request:
    return Request(
        provider="mock", model="m", messages=[Message("user", f"hi {key}")], max_tokens=16
    )


async def test_s1_a_unit_is_sent_only_once_a_durable_mark_lists_it() -> None:
    gw = Gateway()
    marks = DispatchMarks("run", gw, PriceTable(), ShardIndex([(0, 1000)]))  # type: ignore[arg-type]
    entry = _entry(marks, 2, "r1", 1, "fp1")
    marks.expect(entry)
    send = asyncio.create_task(marks.send(entry))
    await asyncio.sleep(0)
    assert not send.done()  # its row is queued, not durable
    gw.make_durable()
    await send
    assert "r1" in gw.listed()


async def test_s1_marks_cover_the_next_units_and_are_written_once_per_window() -> None:
    mc, units = 4, 200
    gw = Gateway()
    marks = DispatchMarks("run", gw, PriceTable(), ShardIndex([(0, 1000)]))  # type: ignore[arg-type]
    keys = [f"r{i}" for i in range(units)]
    entries = {k: _entry(marks, mc, k, i, f"fp{i}") for i, k in enumerate(keys)}
    for k in keys:  # every unit waits for a slot, in order
        marks.expect(entries[k])
    waited = 0
    for k in keys:  # slots come one by one, FIFO; the store keeps up
        send = asyncio.create_task(marks.send(entries[k]))
        await asyncio.sleep(0)
        if not send.done():
            waited += 1
            gw.make_durable()
            await send
        assert k in gw.listed()  # never sent unlisted
        width = len(gw.listed() - set(keys[: keys.index(k)]))
        assert width <= 1 + 2 * mc  # itself and at most 2 x mc ahead (released ones aside)
        marks.release(entries[k])
        gw.make_durable()
    assert waited == 1  # only the first send waited for the store
    assert marks.writes <= units // (mc // 2) + 2  # about one row per mc/2..mc sends
