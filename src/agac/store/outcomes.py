"""Outcomes, answers, tool results, fan-outs, usage and events: a run's progress (a part
of :class:`agac.store.repository.Store`). Progress is written by :meth:`checkpoint`, one
fenced transaction per group commit (S1, S3)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa

from agac.reasons import NOT_CARRIED
from agac.store import tables as t
from agac.store.batches import write_item_results
from agac.store.core import StoreCore
from agac.store.marks import price_unknown, write_marks
from agac.store.rows import Checkpoint, OutcomeRow, UsageTotal
from agac.store.values import OutcomeRecord

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Row

    from agac.store.values import UnitOutcome

__all__ = ["OutcomeRepository"]

_CHUNK = 2000


class OutcomeRepository(StoreCore):
    def outcomes_between(self, run_id: str, lo: int, hi: int) -> list[OutcomeRecord]:
        with self._read() as conn:
            return list(
                map(
                    OutcomeRecord.from_row,
                    conn.execute(
                        sa.select(t.outcomes).where(
                            t.outcomes.c.run_id == run_id,
                            t.outcomes.c.seq >= lo,
                            t.outcomes.c.seq < hi,
                        )
                    ).all(),
                )
            )

    def results_between(
        self, run_id: str, snapshot_id: str, lo: int, hi: int, *, payloads: bool = False
    ) -> tuple[list[Row], list[Row]]:
        """What a run's results table needs of records ``lo <= seq < hi``: (their seq, key
        and, with ``payloads``, payload; the outcomes' seq, action, unit key, status,
        reason, output and fingerprint), each in seq order; one read."""
        r, o = t.records, t.outcomes
        columns = [r.c.seq, r.c.key, r.c.payload, r.c.reason] if payloads else [r.c.seq, r.c.key]
        with self._read() as conn:
            records = conn.execute(
                sa.select(*columns)
                .where(r.c.snapshot_id == snapshot_id, r.c.seq >= lo, r.c.seq < hi)
                .order_by(r.c.seq)
            ).all()
            outcomes = conn.execute(
                sa.select(
                    o.c.seq,
                    o.c.action,
                    o.c.unit_key,
                    o.c.status,
                    o.c.reason,
                    o.c.output,
                    o.c.fingerprint,
                ).where(o.c.run_id == run_id, o.c.seq >= lo, o.c.seq < hi)
            ).all()
        return list(records), list(outcomes)

    def unit_outcomes(self, run_id: str, unit_key: str) -> list[OutcomeRecord]:
        with self._read() as conn:
            return list(
                map(
                    OutcomeRecord.from_row,
                    conn.execute(
                        sa.select(t.outcomes).where(
                            t.outcomes.c.run_id == run_id, t.outcomes.c.unit_key == unit_key
                        )
                    ).all(),
                )
            )

    def iter_action_outcomes(self, run_id: str, action: str) -> Iterator[OutcomeRecord]:
        """Outcomes of one action in record order, streamed."""
        o = t.outcomes
        last, last_key = -1, ""
        while True:
            # Items of a fan-out share their record's seq: page on (seq, unit_key).
            after = sa.or_(o.c.seq > last, sa.and_(o.c.seq == last, o.c.unit_key > last_key))
            with self._read() as conn:
                rows = conn.execute(
                    sa.select(o)
                    .where(o.c.run_id == run_id, o.c.action == action, after)
                    .order_by(o.c.seq, o.c.unit_key)
                    .limit(_CHUNK)
                ).all()
            if not rows:
                return
            yield from map(OutcomeRecord.from_row, rows)
            last, last_key = rows[-1].seq, rows[-1].unit_key
            if len(rows) < _CHUNK:
                return

    def failed_units(self, run_id: str, *, with_outstanding: bool = False) -> list[Row]:
        """Failed units of a run (and, optionally, units skipped ``batch_outstanding``)."""
        o = t.outcomes
        cond = o.c.status == "failed"
        if with_outstanding:
            cond = sa.or_(cond, sa.and_(o.c.status == "skipped", o.c.reason == "batch_outstanding"))
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(o.c.action, o.c.unit_key, o.c.reason, o.c.seq).where(
                        o.c.run_id == run_id, cond
                    )
                ).all()
            )

    def waiting_outcomes(self, workflow: str, *, tenant: str, since: float) -> list[Row]:
        """(run_id, action, unit_key) of the units skipped ``batch_outstanding`` in the
        final runs of the tenant's ``workflow`` that ended at or after ``since``: the runs
        that may have left them waiting on a batch created then."""
        o, r = t.outcomes, t.runs
        with self._read("read units waiting on batches") as conn:
            return list(
                conn.execute(
                    sa.select(o.c.run_id, o.c.action, o.c.unit_key)
                    .select_from(o.join(r, r.c.id == o.c.run_id))
                    .where(
                        r.c.tenant == tenant,
                        r.c.workflow == workflow,
                        r.c.ended_at >= since,
                        o.c.status == "skipped",
                        o.c.reason == "batch_outstanding",
                    )
                ).all()
            )

    def copy_outcomes(self, src: str, dst: str, exclude: set[tuple[str, str]]) -> int:
        """Carry outcomes of run ``src`` into ``dst`` except ``exclude`` (action, unit_key),
        each with the attempts it had (R2, engine/transitions.py ``carry_for_retry``): an
        answer ``reused``, a failure or a skip ``carried``, as ``carry_run_outcomes``."""
        n = 0
        with self._write("carry outcomes over") as conn:
            rows = conn.execute(sa.select(t.outcomes).where(t.outcomes.c.run_id == src))
            batch: list[dict[str, Any]] = []
            for row in rows:
                if (row.action, row.unit_key) in exclude:
                    continue
                d = dict(row._mapping)
                d["run_id"] = dst
                d["origin"] = "reused" if row.status == "answered" else "carried"
                batch.append(d)
                if len(batch) >= _CHUNK:
                    conn.execute(t.outcomes.insert(), batch)
                    n += len(batch)
                    batch = []
            if batch:
                conn.execute(t.outcomes.insert(), batch)
                n += len(batch)
            self._copy_fanouts(conn, src, dst)
        return n

    @staticmethod
    def _copy_fanouts(conn: Connection, src: str, dst: str) -> None:
        """The fan-outs of ``src`` are ``dst``'s too: the item units carried over with them
        are counted against them (a unit that fans out again overwrites its row)."""
        f = t.fanouts
        sel = sa.select(
            sa.literal(dst), f.c.action, f.c.parent_key, f.c.seq, f.c["items"], f.c.created_at
        ).where(f.c.run_id == src)
        conn.execute(
            f.insert().from_select(
                ["run_id", "action", "parent_key", "seq", "items", "created_at"], sel
            )
        )

    def carry_run_outcomes(self, src: str, dst: str, skip_actions: Sequence[str]) -> int:
        """Copy every outcome of run ``src`` into ``dst`` in one statement (R1 fast path,
        engine/transitions.py ``carry``): answered units become ``reused``, failures and
        skips ``carried``, attempts 0; not the halting skips, nor the failures
        :meth:`failures_not_carried` names, nor ``skip_actions``."""
        o = t.outcomes
        now = self.clock.time()
        origin = sa.case(
            (o.c.status == "answered", sa.literal("reused")), else_=sa.literal("carried")
        )
        sel = sa.select(
            sa.literal(dst),
            o.c.action,
            o.c.unit_key,
            o.c.seq,
            o.c.status,
            o.c.reason,
            o.c.detail,
            origin,
            o.c.fingerprint,
            o.c.output,
            sa.literal(0),
            sa.literal(now),
            o.c.checks,
        ).where(o.c.run_id == src)
        if skip_actions:
            sel = sel.where(o.c.action.not_in(list(skip_actions)))
        # Skips that only say a run stopped early are not outcomes to carry: those units
        # are asked (or adopted from the batches still out) by the new run.
        sel = sel.where(sa.not_(sa.and_(o.c.status == "skipped", o.c.reason.in_(NOT_CARRIED))))
        uncarried = self.failures_not_carried(src)
        if uncarried:
            sel = sel.where(sa.not_(sa.and_(o.c.status == "failed", o.c.reason.in_(uncarried))))
        cols = [
            "run_id",
            "action",
            "unit_key",
            "seq",
            "status",
            "reason",
            "detail",
            "origin",
            "fingerprint",
            "output",
            "attempts",
            "updated_at",
            "checks",
        ]
        with self._write("carry outcomes over") as conn:
            # PostgreSQL's driver reports an INSERT's count only when asked to keep it.
            insert = o.insert().from_select(cols, sel).execution_options(preserve_rowcount=True)
            n = conn.execute(insert).rowcount
            self._copy_fanouts(conn, src, dst)
            return n

    def close_units(
        self,
        run_id: str,
        units: Sequence[tuple[int, UnitOutcome]],
        *,
        lease: tuple[str, int, float] | None = None,
    ) -> None:
        """A run that ends early (engine/transitions.py ``close_unit``): each (record seq,
        outcome) written for a unit of ``run_id`` without one — origin ``call``, no
        fingerprint, no attempts, stamped now — in one transaction; a unit that has an
        outcome keeps it."""
        now = self.clock.time()
        rows = [
            OutcomeRow(run_id, *o[:2], seq, *o[2:], "call", None, None, 0, now) for seq, o in units
        ]
        with self._write("end a run's units") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            self._bulk(conn, t.outcomes, rows, "ON CONFLICT DO NOTHING")

    def failures_not_carried(self, run_id: str) -> tuple[str, ...]:
        """Failure reasons of ``run_id`` a new run does not carry over (R1 c): the batches
        ``agac cancel`` cancelled at the provider (``batch_cancelled`` in a run that ended
        ``cancelled``) failed because of the cancel itself, so the next ``agac run``
        starts over on those units, as it does on the units the cancel skipped."""
        with self._read() as conn:
            state = conn.execute(sa.select(t.runs.c.state).where(t.runs.c.id == run_id)).scalar()
        return ("batch_cancelled",) if state == "cancelled" else ()

    def count_action_outcomes_between(self, run_id: str, action: str, lo: int, hi: int) -> int:
        o = t.outcomes
        with self._read() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count())
                    .select_from(o)
                    .where(o.c.run_id == run_id, o.c.action == action, o.c.seq >= lo, o.c.seq < hi)
                ).scalar()
                or 0
            )

    def count_outcomes_between(self, run_id: str, lo: int, hi: int) -> int:
        with self._read() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count())
                    .select_from(t.outcomes)
                    .where(
                        t.outcomes.c.run_id == run_id, t.outcomes.c.seq >= lo, t.outcomes.c.seq < hi
                    )
                ).scalar()
                or 0
            )

    def status_counts_between(self, run_id: str, lo: int, hi: int) -> list[Row]:
        """(action, status, n) groups of the outcomes of records ``lo <= seq < hi``."""
        o = t.outcomes
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(o.c.action, o.c.status, sa.func.count().label("n"))
                    .where(o.c.run_id == run_id, o.c.seq >= lo, o.c.seq < hi)
                    .group_by(o.c.action, o.c.status)
                ).all()
            )

    def get_answers(
        self,
        fingerprints: Sequence[str],
        *,
        tenant: str,
        part: Literal["output", "response"] = "output",
    ) -> dict[str, str]:
        """fingerprint -> stored output JSON text (or, with ``part="response"``, the
        response's: its text, usage, citations), for those the tenant has (S5 within a
        tenant, T2: a tenant never learns from another's answers)."""
        found: dict[str, str] = {}
        if not fingerprints:
            return found
        mark = self.hooks.param
        with self._read("read answers") as conn:
            for i in range(0, len(fingerprints), 512):
                some = list(fingerprints[i : i + 512])
                # Pad to a power of two with repeats: a few statement texts, each
                # prepared once by the driver, instead of one per list length.
                size = 1 << (len(some) - 1).bit_length()
                some += some[-1:] * (size - len(some))
                rows = conn.exec_driver_sql(
                    f"SELECT fingerprint, {part} FROM answers WHERE tenant = {mark} AND "
                    f"fingerprint IN ({', '.join([mark] * size)})",
                    (tenant, *some),
                ).all()
                found.update({fp: out for fp, out in rows})
        return found

    def get_answer(self, fingerprint: str, *, tenant: str) -> Row | None:
        a = t.answers
        with self._read() as conn:
            return conn.execute(
                sa.select(a).where(a.c.tenant == tenant, a.c.fingerprint == fingerprint)
            ).first()

    def get_tool_results(self, hashes: Sequence[str], *, tenant: str) -> dict[str, str]:
        """input hash -> stored output JSON text, for those the tenant has (T2)."""
        found: dict[str, str] = {}
        tr = t.tool_results
        with self._read("read tool results") as conn:
            for i in range(0, len(hashes), 500):
                rows = conn.execute(
                    sa.select(tr.c.input_hash, tr.c.output).where(
                        tr.c.tenant == tenant, tr.c.input_hash.in_(list(hashes[i : i + 500]))
                    )
                ).all()
                found.update({r.input_hash: r.output for r in rows})
        return found

    def fanout_totals(
        self, run_id: str, lo: int | None = None, hi: int | None = None
    ) -> dict[str, tuple[int, int]]:
        """fan-out action -> (parents fanned out, items they made), optionally for the
        records with ``lo <= seq < hi``."""
        f = t.fanouts
        q = (
            sa.select(
                f.c.action,
                sa.func.count().label("parents"),
                sa.func.sum(f.c["items"]).label("n_items"),
            )
            .where(f.c.run_id == run_id)
            .group_by(f.c.action)
        )
        if lo is not None and hi is not None:
            q = q.where(f.c.seq >= lo, f.c.seq < hi)
        with self._read() as conn:
            return {r.action: (int(r.parents), int(r.n_items or 0)) for r in conn.execute(q).all()}

    def fanouts_between(self, run_id: str, lo: int, hi: int) -> dict[tuple[str, str], int]:
        """(fan-out action, parent key) -> item count, for records ``lo <= seq < hi``."""
        f = t.fanouts
        with self._read() as conn:
            rows = conn.execute(
                sa.select(f.c.action, f.c.parent_key, f.c["items"].label("n")).where(
                    f.c.run_id == run_id, f.c.seq >= lo, f.c.seq < hi
                )
            ).all()
        return {(r.action, r.parent_key): int(r.n) for r in rows}

    def _rows_under(self, table: sa.Table, run_id: str, key: str, order: Any) -> list[Row]:
        """Rows of ``table`` for the unit ``key`` and every item under it (``key/…``)."""
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(table)
                    .where(
                        table.c.run_id == run_id,
                        sa.or_(
                            table.c.unit_key == key,
                            table.c.unit_key.startswith(key + "/", autoescape=True),
                        ),
                    )
                    .order_by(order)
                ).all()
            )

    def unit_outcomes_under(self, run_id: str, key: str) -> list[OutcomeRecord]:
        """Outcomes of the unit ``key`` and of every item under it (``key/…``)."""
        return list(
            map(
                OutcomeRecord.from_row,
                self._rows_under(t.outcomes, run_id, key, t.outcomes.c.unit_key),
            )
        )

    def usage_under(self, run_id: str, key: str) -> list[Row]:
        return self._rows_under(t.usage, run_id, key, t.usage.c.id)

    def events_under(self, run_id: str, key: str) -> list[Row]:
        return self._rows_under(t.events, run_id, key, t.events.c.id)

    def find_outcomes(
        self,
        run_id: str,
        *,
        status: str | None = None,
        action: str | None = None,
        limit: int = 10_000,
    ) -> list[Row]:
        """Outcomes of a run filtered by status and action, in record order."""
        o = t.outcomes
        q = sa.select(
            o.c.action,
            o.c.unit_key,
            o.c.seq,
            o.c.status,
            o.c.reason,
            o.c.detail,
            o.c.origin,
            o.c.attempts,
        ).where(o.c.run_id == run_id)
        if status is not None:
            q = q.where(o.c.status == status)
        if action is not None:
            q = q.where(o.c.action == action)
        with self._read() as conn:
            return list(
                conn.execute(q.order_by(o.c.seq, o.c.unit_key, o.c.action).limit(limit)).all()
            )

    def checkpoint(self, group: Checkpoint, *, lease: tuple[str, int, float] | None = None) -> None:
        """Write one group of progress atomically, after checking the fencing token.
        Answers, tool results, usage and batch items carry the group's ``tenant``.
        ``item_results`` (what was read for batch items) commit with the answers and usage
        they ledger: a crash never leaves one without the other. ``marks`` are dispatch
        mark rows (S1) written before the units they list are sent; ``priced`` gives
        ``unknown`` usage rows of a fingerprint real usage (store/marks.py)."""
        tenant = group.tenant
        with self._write("write a checkpoint") as conn:
            if lease is not None:
                self._fence(conn, *lease)
            if group.marks:
                write_marks(self, conn, group.marks)
            self._bulk(conn, t.answers, group.answers, "ON CONFLICT DO NOTHING", tenant=tenant)
            self._bulk(
                conn, t.tool_results, group.tool_results, "ON CONFLICT DO NOTHING", tenant=tenant
            )
            self._bulk(conn, t.usage, group.usage, tenant=tenant)
            if group.priced:
                price_unknown(conn, group.priced, tenant)
            self._bulk(conn, t.outcomes, group.outcomes)
            self._bulk(conn, t.events, group.events)
            self._bulk(
                conn, t.batch_items, group.batch_items, "ON CONFLICT DO NOTHING", tenant=tenant
            )
            self._bulk(
                conn,
                t.fanouts,
                group.fanouts,
                "ON CONFLICT (run_id, action, parent_key) DO UPDATE SET items = excluded.items",
            )
            if group.item_results:
                write_item_results(conn, self.hooks.param, group.item_results)

    def iter_events(self, run_id: str, after: int = 0, limit: int = 1000) -> list[Row]:
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.events)
                    .where(t.events.c.run_id == run_id, t.events.c.id > after)
                    .order_by(t.events.c.id)
                    .limit(limit)
                ).all()
            )

    def run_events_of(self, run_id: str, kinds: Sequence[str]) -> list[Row]:
        """A run's events of these kinds, oldest first (few: run-level bookkeeping such as
        the context caches it created)."""
        e = t.events
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(e)
                    .where(e.c.run_id == run_id, e.c.kind.in_(list(kinds)))
                    .order_by(e.c.id)
                ).all()
            )

    def unit_events(self, run_id: str, unit_key: str) -> list[Row]:
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.events)
                    .where(t.events.c.run_id == run_id, t.events.c.unit_key == unit_key)
                    .order_by(t.events.c.id)
                ).all()
            )

    def first_failure(self, run_id: str, action: str, reason: str) -> Row | None:
        """The first unit (in input order) of ``action`` that failed (or was skipped)
        ``reason``."""
        o = t.outcomes
        with self._read() as conn:
            return conn.execute(
                sa.select(o.c.unit_key, o.c.detail)
                .where(
                    o.c.run_id == run_id,
                    o.c.action == action,
                    o.c.status.in_(("failed", "skipped")),
                    o.c.reason == reason,
                )
                .order_by(o.c.seq, o.c.unit_key)
                .limit(1)
            ).first()

    def check_counts(self, run_id: str) -> list[Row]:
        """(action, checks, n) groups of a run's outcomes judged by checks: few groups, as
        ``checks`` is the verdicts' JSON text (name → passed)."""
        o = t.outcomes
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(o.c.action, o.c.checks, sa.func.count().label("n"))
                    .where(o.c.run_id == run_id, o.c.checks.is_not(None))
                    .group_by(o.c.action, o.c.checks)
                ).all()
            )

    def outcome_counts(self, run_id: str) -> list[Row]:
        """(action, status, reason, origin, n) groups of a run's outcomes."""
        o = t.outcomes
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(
                        o.c.action, o.c.status, o.c.reason, o.c.origin, sa.func.count().label("n")
                    )
                    .where(o.c.run_id == run_id)
                    .group_by(o.c.action, o.c.status, o.c.reason, o.c.origin)
                ).all()
            )

    def usage_totals(self, run_ids: Sequence[str], bands: Sequence[int] = ()) -> list[UsageTotal]:
        """(action, kind, provider, model, tier, origin) groups: calls, tokens, cost; for
        ``unknown`` calls (S1) also how many a later answer priced, and how many rows are
        ``estimated`` (answers billed in a batch agac did not read, whose usage the
        provider did not report). With ``bands`` (input tokens per call, ascending), each
        group is split further by ``band``: how many of the bands a call's input is above
        — so a price's long-context tier applies to whole bands, never to a sum."""
        u = t.usage
        tokens_in = u.c.input_tokens + u.c.cached_tokens + u.c.cache_write_tokens
        band = sum(
            (sa.case((tokens_in > above, 1), else_=0) for above in bands), sa.literal(0)
        ).label("band")
        keys: list[Any] = [u.c.action, u.c.kind, u.c.provider, u.c.model, u.c.tier, u.c.origin]
        if bands:
            keys.append(band)
        with self._read() as conn:
            rows = list(
                conn.execute(
                    sa.select(
                        *keys,
                        sa.func.count().label("calls"),
                        sa.func.sum(sa.case((u.c.status == "priced", 1), else_=0)).label("priced"),
                        sa.func.sum(sa.case((u.c.status == "estimated", 1), else_=0)).label(
                            "estimated"
                        ),
                        sa.func.sum(u.c.input_tokens).label("input_tokens"),
                        sa.func.sum(u.c.cached_tokens).label("cached_tokens"),
                        sa.func.sum(u.c.cache_write_tokens).label("cache_write_tokens"),
                        sa.func.sum(u.c.output_tokens).label("output_tokens"),
                        sa.func.sum(u.c.reasoning_tokens).label("reasoning_tokens"),
                        sa.func.sum(u.c.cost_usd).label("cost_usd"),
                    )
                    .where(u.c.run_id.in_(list(run_ids)))
                    .group_by(*[k.element if k is band else k for k in keys])
                    .order_by(
                        u.c.action,
                        u.c.kind,
                        u.c.provider,
                        u.c.model,
                        u.c.tier,
                        u.c.origin.is_not(None),
                    )
                ).all()
            )
        return [
            UsageTotal(
                r.action,
                r.kind,
                r.provider,
                r.model,
                r.tier,
                r.origin,
                int(r.calls),
                int(r.priced or 0),
                int(r.estimated or 0),
                int(r.input_tokens or 0),
                int(r.cached_tokens or 0),
                int(r.cache_write_tokens or 0),
                int(r.output_tokens or 0),
                int(r.reasoning_tokens or 0),
                float(r.cost_usd or 0.0),
                int(r.band) if bands else 0,
            )
            for r in rows
        ]

    def usage_tool_uses(self, run_ids: Sequence[str]) -> list[Row]:
        """The rows of these runs that used a provider's server tools: the
        (action, kind, provider, model, tier, origin) group of each and its
        ``server_tools`` JSON (few rows: most calls use none)."""
        u = t.usage
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(
                        u.c.action,
                        u.c.kind,
                        u.c.provider,
                        u.c.model,
                        u.c.tier,
                        u.c.origin,
                        u.c.server_tools,
                    ).where(u.c.run_id.in_(list(run_ids)), u.c.server_tools.is_not(None))
                ).all()
            )

    def unit_usage(self, run_id: str, unit_key: str) -> list[Row]:
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.usage)
                    .where(t.usage.c.run_id == run_id, t.usage.c.unit_key == unit_key)
                    .order_by(t.usage.c.id)
                ).all()
            )

    def run_usage(self, run_id: str) -> list[Row]:
        """Every llm call the run's ledger holds, in order (a pilot's sample is small)."""
        u = t.usage
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(u).where(u.c.run_id == run_id, u.c.kind == "llm").order_by(u.c.id)
                ).all()
            )
