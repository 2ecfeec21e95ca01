"""A reproducible sample of a workflow's input, for ``agac pilot`` (docs/cli.md, agac pilot).

A record's place in the sample depends only on its key and the seed: each valid record is
ranked by SHA-256 of (seed, key), and the sample is the lowest-ranked records. So the same
input and seed give the same sample whatever the order of the files, and a record added
to the input never pushes out another record unless it ranks lower.

With a stratifying field, the sample is split over the field's values in proportion to
their share of the input (largest remainders; every value gets at least one record when
the sample has room for all of them), each value's share taken lowest-ranked first.
Memory holds, per value, the count and at most ``size`` ranks — never the records.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from agac.data.readers import InputRecord
from agac.data.sources import RecordSource

__all__ = ["NO_VALUE", "Sample", "SampleSource", "choose_sample", "stratum_of"]

NO_VALUE = "(none)"
"""The stratum of a record without the stratifying field."""


@dataclass(frozen=True)
class Sample:
    """The chosen record keys, and per stratum (one, ``""``, when not stratified) how many
    valid records the input holds and how many were chosen."""

    keys: frozenset[str]
    strata: dict[str, tuple[int, int]]
    population: int
    """Valid records in the input."""
    stratum_of: dict[str, str]
    """Each chosen key's stratum."""


def stratum_of(payload: dict[str, Any], field: str | None) -> str:
    """The record's value of ``field`` (a dotted path) as a stratum name; ``""`` without a
    field, :data:`NO_VALUE` when the record lacks it."""
    if field is None:
        return ""
    value: Any = payload
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return NO_VALUE
        value = value[part]
    if value is None:
        return NO_VALUE
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _rank(seed: int, key: str) -> bytes:
    return hashlib.sha256(f"{seed}\x1f{key}".encode()).digest()


def choose_sample(items: Iterable[tuple[str, str]], size: int, seed: int) -> Sample:
    """The sample of ``size`` keys from ``items`` — (key, stratum) of each valid record —
    for ``seed``. Fewer when the input holds fewer."""
    counts: dict[str, int] = {}
    lowest: dict[str, list[tuple[bytes, str]]] = {}  # per stratum, a max-heap by negated rank
    for key, stratum in items:
        counts[stratum] = counts.get(stratum, 0) + 1
        heap = lowest.setdefault(stratum, [])
        entry = (bytes(255 - b for b in _rank(seed, key)), key)
        if len(heap) < size:
            heapq.heappush(heap, entry)
        elif entry > heap[0]:
            heapq.heapreplace(heap, entry)
    quota = _allocate(counts, size)
    keys: dict[str, str] = {}
    for stratum, heap in lowest.items():
        best = sorted(heap, reverse=True)[: quota[stratum]]
        keys.update((key, stratum) for _, key in best)
    strata = {s: (counts[s], quota[s]) for s in sorted(counts)}
    return Sample(frozenset(keys), strata, sum(counts.values()), keys)


def _allocate(counts: dict[str, int], size: int) -> dict[str, int]:
    """Each stratum's share of ``size``: proportional, by largest remainder, at least one
    each when there is room for all, never more than the stratum holds."""
    total = sum(counts.values())
    if total <= size:
        return dict(counts)
    floor = 1 if size >= len(counts) else 0
    exact = {s: size * n / total for s, n in counts.items()}
    quota = {s: min(counts[s], max(floor, int(exact[s]))) for s in counts}
    order = sorted(counts, key=lambda s: (-(exact[s] - int(exact[s])), s))
    while sum(quota.values()) < size:
        grown = False
        for s in order:
            if sum(quota.values()) >= size:
                break
            if quota[s] < counts[s]:
                quota[s] += 1
                grown = True
        if not grown:
            break
    while sum(quota.values()) > size:  # the floors of many small strata overshot
        s = max((s for s in quota if quota[s] > floor), key=lambda s: quota[s] - exact[s])
        quota[s] -= 1
    return quota


@dataclass(frozen=True)
class SampleSource:
    """The records of ``inner`` whose keys are in ``keys``, in the input's order, as read:
    a run over it sees each record with its own key, file and line."""

    inner: RecordSource
    keys: frozenset[str]

    @property
    def label(self) -> str:
        return f"{self.inner.label} (a sample of {len(self.keys)})"

    def identity(self) -> str:
        digest = hashlib.sha256("\x1f".join(sorted(self.keys)).encode()).hexdigest()
        return f"{self.inner.identity()}\x1esample\x1f{digest}"

    def records(self, id_field: str | None) -> Iterator[InputRecord]:
        return (r for r in self.inner.records(id_field) if r.key in self.keys)
