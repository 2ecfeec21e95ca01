"""Splitting one file's staged requests into batch parts (B1, docs/guarantees.md).

A file is cut only where the provider's limits require it: a part ends when the next
request would take it past the most requests or bytes a batch holds. A provider that also
takes no batch below a number of requests (Bedrock: 100 records a job) never gets one:
when the last part falls short, the parts before it give it requests, nearest first, each
keeping the minimum itself, and the parts are cut again at the new boundaries (checked
against the byte limit once more, since every boundary moved). Requests that still cannot
make a batch of the minimum within the limits — a file too small, or parts cut so small by
their bytes that no balance helps — are returned apart: the caller sends them as live
calls or holds them, never as a batch the provider would refuse.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Split", "split_parts"]

LINE_OVERHEAD = 300
"""Bytes a batch line adds around a request (its id, the envelope) when parts are sized."""


@dataclass(frozen=True, slots=True)
class Split:
    """The parts to send, each at least the minimum, and the requests that make none."""

    parts: list[list[str]]
    short: list[str]


def split_parts(
    sizes: Iterable[tuple[str, int]], *, most: int, max_bytes: int, least: int = 1
) -> Split:
    """Cut ``sizes`` — (custom_id, bytes of its request), in order — into parts of at most
    ``most`` requests and ``max_bytes`` bytes each (a request's bytes counted with
    :data:`LINE_OVERHEAD`), none below ``least``; the requests that fit no such part are
    :attr:`Split.short`."""
    items = [(custom_id, n + LINE_OVERHEAD) for custom_id, n in sizes]
    counts = _greedy(items, most, max_bytes)
    if len(counts) > 1 and counts[-1] < least:
        balanced = _lift_last(counts, least)
        if balanced is not None and _fits(items, balanced, most, max_bytes):
            counts = balanced
    parts: list[list[str]] = []
    short: list[str] = []
    start = 0
    for count in counts:
        ids = [custom_id for custom_id, _ in items[start : start + count]]
        start += count
        if count >= least:
            parts.append(ids)
        else:
            short.extend(ids)
    return Split(parts, short)


def _greedy(items: list[tuple[str, int]], most: int, max_bytes: int) -> list[int]:
    """The request count of each part when every part is filled up to a limit."""
    counts: list[int] = []
    n = size = 0
    for _, length in items:
        if n and (n >= most or size + length > max_bytes):
            counts.append(n)
            n = size = 0
        n += 1
        size += length
    if n:
        counts.append(n)
    return counts


def _lift_last(counts: list[int], least: int) -> list[int] | None:
    """The counts with the last part raised to ``least`` by the parts before it, nearest
    first, each keeping at least ``least``; None when together they cannot spare enough."""
    out = list(counts)
    need = least - out[-1]
    for i in range(len(out) - 2, -1, -1):
        give = min(need, max(0, out[i] - least))
        out[i] -= give
        out[-1] += give
        need -= give
        if need == 0:
            return out
    return None


def _fits(items: list[tuple[str, int]], counts: list[int], most: int, max_bytes: int) -> bool:
    """Whether every part, cut at these counts, is within the count and byte limits."""
    start = 0
    for count in counts:
        part = items[start : start + count]
        start += count
        if count > most or sum(length for _, length in part) > max_bytes:
            return False
    return True
