"""``head``: the one object that says what a storage point holds and who owns it (O2).

It names the owner (a random id, host and pid), the lease's length, the snapshot (key,
size, SHA-256) and, after it, the log: one entry per WAL generation with its number of
segments. A segment ``head`` does not name does not exist. ``head`` is only ever
replaced with ``If-Match`` on the ETag its writer read, so two processes can never both
believe they own the point; the lease runs from ``head``'s Last-Modified by the server's
clock, and every replace renews it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from agac.errors import StoreError

__all__ = ["FORMAT", "Generation", "Head", "Owner", "SnapshotRef", "segment_key"]

FORMAT = 1
HEAD_KEY = "head"


def segment_key(generation: str, number: int) -> str:
    """The object of segment ``number`` (1-based) of a WAL generation."""
    return f"log/{generation}/{number:08d}"


@dataclass(frozen=True)
class Owner:
    id: str
    host: str
    pid: int

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


@dataclass(frozen=True)
class SnapshotRef:
    key: str
    size: int
    sha256: str
    taken_at: float
    """When it was taken, by the taker's clock (shown by ``agac store info``)."""


@dataclass(frozen=True)
class Generation:
    """One WAL generation of the log: its segments are ``segment_key(id, 1..segments)``,
    each the WAL's bytes from the end of the previous one."""

    id: str
    segments: int
    bytes: int


@dataclass(frozen=True)
class Head:
    owner: Owner | None
    ttl: float
    snapshot: SnapshotRef | None
    log: tuple[Generation, ...]
    serial: int

    @property
    def state_id(self) -> str:
        """What the durable copy is (snapshot and log), independent of who owns it: a
        local copy made from this state is reused only while ``head`` says the same."""
        text = json.dumps(
            [self.snapshot.key if self.snapshot else None, [[g.id, g.segments] for g in self.log]]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    @property
    def log_bytes(self) -> int:
        return sum(g.bytes for g in self.log)

    @property
    def log_segments(self) -> int:
        return sum(g.segments for g in self.log)

    def next(self, **changes: Any) -> Head:
        return replace(self, serial=self.serial + 1, **changes)

    def with_segment(self, generation: str, size: int) -> Head:
        log = list(self.log)
        if log and log[-1].id == generation:
            last = log[-1]
            log[-1] = Generation(last.id, last.segments + 1, last.bytes + size)
        else:
            log.append(Generation(generation, 1, size))
        return self.next(log=tuple(log))

    def encode(self) -> bytes:
        doc = {
            "format": FORMAT,
            "owner": None
            if self.owner is None
            else {"id": self.owner.id, "host": self.owner.host, "pid": self.owner.pid},
            "ttl": self.ttl,
            "snapshot": None
            if self.snapshot is None
            else {
                "key": self.snapshot.key,
                "size": self.snapshot.size,
                "sha256": self.snapshot.sha256,
                "taken_at": self.snapshot.taken_at,
            },
            "log": [{"id": g.id, "segments": g.segments, "bytes": g.bytes} for g in self.log],
            "serial": self.serial,
        }
        return json.dumps(doc, indent=1).encode()

    @classmethod
    def decode(cls, data: bytes, where: str) -> Head:
        try:
            doc = json.loads(data)
            if doc.get("format") != FORMAT:
                raise StoreError(
                    f"the storage point {where} has head format "
                    f"{doc.get('format')!r}; this agac reads format {FORMAT}: "
                    "upgrade agac"
                )
            owner = doc.get("owner")
            snap = doc.get("snapshot")
            return cls(
                owner=None
                if owner is None
                else Owner(str(owner["id"]), str(owner["host"]), int(owner["pid"])),
                ttl=float(doc["ttl"]),
                snapshot=None
                if snap is None
                else SnapshotRef(
                    str(snap["key"]),
                    int(snap["size"]),
                    str(snap["sha256"]),
                    float(snap["taken_at"]),
                ),
                log=tuple(
                    Generation(str(g["id"]), int(g["segments"]), int(g["bytes"]))
                    for g in doc.get("log", ())
                ),
                serial=int(doc.get("serial", 0)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"the head of the storage point {where} is not readable "
                f"({type(exc).__name__}: {exc}); it was not written by agac, or "
                "was altered"
            ) from exc
