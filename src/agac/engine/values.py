"""The values that cross the engine's rooms: a unit's record, its one result shape, the
run's control flags, and the result of a pass of the run loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

from agac.engine.interrupts import StopSignal
from agac.jsontext import JSON
from agac.keys import escape, needs_escaping

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from sqlalchemy.engine import Row

    from agac.clock import Clock
    from agac.store.values import OutcomeStatus, RunState

__all__ = ["Halt", "PassResult", "RecordUnit", "RunControl", "Settled", "Stopped", "UnitRecord"]

_RECORD_COLUMNS = ("snapshot_id", "seq", "key", "file", "n", "line", "payload", "reason", "error")
"""The ``records`` table's columns, in order (agac/store/tables.py)."""


class Settled(NamedTuple):
    """A unit's outcome as the rest of its record's walk sees it — the one shape of a
    unit's result (a call shared by single-flight and a unit read from a batch alike).
    Immutable; a named tuple because one is made for every unit."""

    status: OutcomeStatus
    reason: str | None = None
    output: JSON = None
    detail: str | None = None


class Stopped(Exception):
    """The run is stopping; this unit stays pending."""


class UnitRecord(Protocol):
    """What a unit knows of its record: a record of the input snapshot, or one item of a
    fan-out (key ``<record>/<i>``, its record's ``seq`` and file)."""

    @property
    def key(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def file(self) -> str: ...
    @property
    def n(self) -> int: ...
    @property
    def line(self) -> int: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def payload(self) -> str | None: ...
    @property
    def record_key(self) -> str: ...
    @property
    def item_key(self) -> str | None: ...
    @property
    def custom(self) -> str:
        """The base of its batch custom_id (``r<seq>``, ``r<seq>_<i>_<j>``: within
        ``^[a-zA-Z0-9_-]+$``)."""


class RecordUnit(NamedTuple):
    """A record of the input snapshot, as a unit's record (immutable; one per record):
    ``key`` is its unit key, the record key escaped (agac/keys.py), ``raw_key`` the key as
    in the input when escaping changed it."""

    key: str
    seq: int
    file: str
    n: int
    line: int
    reason: str | None
    error: str | None
    payload: str | None
    raw_key: str | None = None

    @classmethod
    def from_row(cls, row: Row) -> RecordUnit:
        key = row.key
        if needs_escaping(key):
            return cls(
                escape(key),
                row.seq,
                row.file,
                row.n,
                row.line,
                row.reason,
                row.error,
                row.payload,
                key,
            )
        return cls(key, row.seq, row.file, row.n, row.line, row.reason, row.error, row.payload)

    @classmethod
    def from_rows(cls, rows: Sequence[Row]) -> list[RecordUnit]:
        """:meth:`from_row` of each ``records`` row, unpacked by position when the rows
        hold the table's columns in its order (as ``Store.iter_records`` reads them):
        reading a row's fields by name costs more than the rest of the unit."""
        if not rows or tuple(getattr(rows[0], "_fields", ())) != _RECORD_COLUMNS:
            return [cls.from_row(r) for r in rows]
        new = tuple.__new__
        units = []
        for row in rows:
            _, seq, key, file, n, line, payload, reason, error = row
            if needs_escaping(key):
                units.append(cls.from_row(row))
            else:
                units.append(new(cls, (key, seq, file, n, line, reason, error, payload, None)))
        return units

    @property
    def record_key(self) -> str:
        """The record's key as in the input."""
        return self.key if self.raw_key is None else self.raw_key

    @property
    def item_key(self) -> str | None:
        return None

    @property
    def custom(self) -> str:
        return f"r{self.seq}"


class RunControl:
    """Whether the run goes on: stopping (Ctrl-C, a lost lease, a decision that ends the
    run), cancelled (``agac cancel`` seen at a heartbeat), past its deadline (R4), and
    which actions failed as a whole (a provider's ``unsupported`` answer: the action's
    other units fail without a call, and the run marks the action failed), and which are
    paused (a burst of identical transport failures: the provider is unreachable, so the
    action's units not answered yet are skipped ``provider_unreachable`` and the next run
    asks them again). Set by the run loop, its heartbeat and a unit's call; read by every
    unit before it sends."""

    def __init__(
        self,
        clock: Clock,
        deadline_at: float | None,
        live_at: Mapping[str, float] | None = None,
        live: Iterable[str] = (),
        start_at: Mapping[str, float] | None = None,
    ) -> None:
        self.clock = clock
        self.start_at = dict(start_at or {})
        """Per online action held for its model's cheaper hours, when its calls may go."""
        self.deadline_at = deadline_at
        self.live_at = dict(live_at or {})
        """B13: per hybrid action, the instant its records still in batches go live."""
        self._live = set(live)
        self._live_units: dict[str, set[str]] = {}
        """Per batch action, the units sent live because their file held fewer requests
        than the provider takes in a batch (``below_minimum: live``)."""
        self.stopping = False
        self.cancel_requested = False
        self.stop_signal = StopSignal()
        """Set with ``stopping``: wakes every sleeper (backoff, Retry-After, polls) at once."""
        self._failed_actions: dict[str, str] = {}
        self._paused_actions: dict[str, str] = {}
        self._transport: dict[str, tuple[str, int]] = {}
        """Per action: the last transport failure's text and how many in a row."""

    def transport_failed(self, action: str, what: str, threshold: int) -> str | None:
        """A call of ``action`` could not reach its provider (``what``). The ``threshold``-th
        identical failure in a row, with no answer between, pauses the action: why it
        paused then (and from then on), else None."""
        last, count = self._transport.get(action, ("", 0))
        count = count + 1 if last == what else 1
        self._transport[action] = (what, count)
        if count >= threshold:
            self._paused_actions.setdefault(
                action,
                f"paused after {count} calls in a row failed the same way: {what}",
            )
        return self._paused_actions.get(action)

    def transport_ok(self, action: str) -> None:
        """A call of ``action`` reached its provider: the count of failures starts again."""
        if self._transport:
            self._transport.pop(action, None)

    def action_paused(self, action: str) -> str | None:
        """Why ``action`` sends nothing more in this run (its provider is unreachable)."""
        return self._paused_actions.get(action) if self._paused_actions else None

    def fail_action(self, action: str, why: str) -> None:
        """``action`` cannot run at all (``why``): nothing more of it is sent."""
        self._failed_actions.setdefault(action, why)

    def action_failed(self, action: str) -> str | None:
        """Why ``action`` failed as a whole in this run, or None."""
        return self._failed_actions.get(action) if self._failed_actions else None

    @property
    def failed_actions(self) -> dict[str, str]:
        """Each action that failed as a whole, with why (the run records their state)."""
        return dict(self._failed_actions)

    def stop(self) -> None:
        """Stop sending and waiting; what is in flight settles and is committed."""
        self.stopping = True
        self.stop_signal.set()

    async def sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the run stops meanwhile; True when it stopped."""
        return self.stopping or await self.stop_signal.sleep(seconds)

    def cancel(self) -> None:
        self.cancel_requested = True
        self.stop()

    def deadline_passed(self) -> bool:
        return self.deadline_at is not None and self.clock.time() >= self.deadline_at

    def is_live(self, action: str, unit: str | None = None) -> bool:
        """B13: the batch action switched live in this run: its units are sent online;
        with ``unit``, also that unit alone when its file was below the provider's
        batch minimum (:meth:`go_live_units`)."""
        if self._live and action in self._live:
            return True
        return unit is not None and unit in self._live_units.get(action, ())

    def go_live_units(self, action: str, units: Iterable[str]) -> None:
        """Send these units of a batch action live in this run: their file holds fewer
        requests than the provider takes in one batch."""
        self._live_units.setdefault(action, set()).update(units)

    def go_live(self, action: str) -> None:
        self._live.add(action)

    def live_due(self, action: str) -> bool:
        """B13: the action's instant to go live has come and it has not switched yet."""
        at = self.live_at.get(action)
        return at is not None and action not in self._live and self.clock.time() >= at

    def held(self, action: str) -> float | None:
        """The instant ``action``'s calls may go when it is held for cheaper hours that
        have not opened yet, else None."""
        at = self.start_at.get(action) if self.start_at else None
        return at if at is not None and self.clock.time() < at else None

    def held_actions(self) -> dict[str, float]:
        """Each action still held for its model's cheaper hours, with its start instant."""
        return {a: at for a in self.start_at if (at := self.held(a)) is not None}

    def next_live_at(self) -> float | None:
        """The earliest instant a hybrid action that has not switched yet goes live, or an
        action held for its model's cheaper hours starts."""
        waiting = [at for a, at in self.live_at.items() if a not in self._live]
        waiting += self.held_actions().values()
        return min(waiting) if waiting else None


PassKind = Literal[
    "complete",
    "paused",
    "awaiting_approval",
    "interrupted",
    "timed_out",
    "cancelled",
    "failed_with_batches_out",
]


@dataclass(frozen=True, slots=True)
class PassResult:
    """Where the run loop stopped: every unit settled (``complete``), waiting on batches or
    an effect (``paused``), only on people (``awaiting_approval``), Ctrl-C
    (``interrupted``), its deadline, a cancel, or an action refused while batches of other
    files are out; with what it waits on. A decision that ends the run is a :class:`Halt`."""

    kind: PassKind
    waiting: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Halt:
    """A decision that ends the whole run: its final state (``on_reject: fail_run`` ->
    ``failed``, ``on_expire: time_out_run`` -> ``timed_out``) and why."""

    state: RunState
    why: str
