"""Runs, their leases and their actions' states (a part of :class:`agac.store.repository.Store`).

A run comes out of here as a :class:`agac.store.values.RunRecord` (options and config
decoded once). A run belongs to its tenant (T2): a workflow's runs are found
by (tenant, workflow); lookups for people take the tenants they may see
(:func:`tenant_condition`), so another tenant's run is simply not found. The store holds
"at most one run that is not final per (tenant, workflow)" itself (a unique partial
index): a second admission loses with :class:`RunAlreadyOpen`.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agac.errors import LeaseHeld, RefusedError
from agac.jsontext import dumps
from agac.store import tables as t
from agac.store.core import StoreCore
from agac.store.values import FINAL_STATES, RunRecord, RunSettings

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

__all__ = ["RunAlreadyOpen", "RunRepository", "Tenants", "run_lease", "tenant_condition"]

Tenants = Collection[str] | None
"""The tenants whose objects a lookup may return: a caller's (T2), or None for every
tenant (the engine's own bookkeeping, workers)."""


class RunAlreadyOpen(RefusedError):
    """Another run of the workflow is already open in this tenant."""


def run_lease(run_id: str) -> str:
    """The name of the lease that owns run ``run_id`` (S3)."""
    return f"run:{run_id}"


def tenant_condition(tenants: Tenants, column: Any = None) -> Any:
    """A condition keeping the rows of ``tenants`` (None: every tenant) — on
    ``runs.tenant``, or on the ``tenant`` column given."""
    if tenants is None:
        return sa.true()
    column = t.runs.c.tenant if column is None else column
    names = sorted(tenants)
    if not names:
        return sa.false()
    return column == names[0] if len(names) == 1 else column.in_(names)


def _record(row: Any) -> RunRecord | None:
    return None if row is None else RunRecord.from_row(row)


class _Fields:
    """A dict read like a row (the run just inserted)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.__dict__.update(fields)


class RunRepository(StoreCore):
    # -- leases (S3) ----------------------------------------------------------------

    def acquire_lease(
        self, name: str, *, host: str, pid: int, ttl: float, may_take: Any = None
    ) -> int:
        """Take lease ``name`` and return its new fencing token.

        Free or expired leases are taken; a lease held by another owner is taken only
        when ``may_take(row)`` says so (e.g. a dead process on this host). Otherwise
        :class:`LeaseHeld` names the owner and expiry.
        """
        now = self.clock.time()
        with self._write("take the lease") as conn:
            row = conn.execute(
                self.hooks.for_update(sa.select(t.leases).where(t.leases.c.name == name))
            ).first()
            if row is None:
                # Two processes can both find no row; the second insert must lose cleanly
                # (LeaseHeld), not fail the store guard with a unique violation.
                res = conn.execute(
                    self.hooks.insert(t.leases)
                    .values(name=name, host=host, pid=pid, token=1, expires_at=now + ttl)
                    .on_conflict_do_nothing(index_elements=["name"])
                    .returning(t.leases.c.name)
                )
                if res.first() is None:
                    raise LeaseHeld("the lease was taken by another process at the same moment")
                return 1
            mine = row.host == host and row.pid == pid
            if not mine and row.expires_at > now and not (may_take and may_take(row)):
                raise LeaseHeld(
                    f"owned by pid {row.pid} on {row.host} until "
                    f"{time.strftime('%H:%M:%S', time.localtime(row.expires_at))}"
                )
            token = row.token + 1
            res = conn.execute(
                t.leases.update()
                .where(t.leases.c.name == name, t.leases.c.token == row.token)
                .values(host=host, pid=pid, token=token, expires_at=now + ttl)
            )
            if res.rowcount != 1:
                raise LeaseHeld("the lease was taken by another process at the same moment")
            return token

    def renew_lease(self, name: str, token: int, ttl: float) -> None:
        with self._write("renew the lease") as conn:
            self._fence(conn, name, token, ttl)

    def release_lease(self, name: str, token: int) -> None:
        with self._write("release the lease") as conn:
            conn.execute(
                t.leases.update()
                .where(t.leases.c.name == name, t.leases.c.token == token)
                .values(expires_at=0.0)
            )

    def get_lease(self, name: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(sa.select(t.leases).where(t.leases.c.name == name)).first()

    # -- runs -----------------------------------------------------------------------

    def create_run(
        self,
        *,
        id: str,
        workflow: str,
        workflow_path: str,
        retry_of: str | None,
        config: dict[str, Any],
        config_hash: str,
        snapshot_id: str,
        fresh: bool,
        settings: RunSettings,
        tenant: str,
    ) -> RunRecord:
        """Admit a run (state ``queued``) and return it as stored; RunAlreadyOpen when the
        tenant has an open run of the workflow (another process admitted it first)."""
        now = self.clock.time()
        fields: dict[str, Any] = {
            "id": id,
            "workflow": workflow,
            "workflow_path": workflow_path,
            "state": "queued",
            "retry_of": retry_of,
            "config": dumps(config),
            "config_hash": config_hash,
            "snapshot_id": snapshot_id,
            "fresh": fresh,
            "options": settings.to_json(),
            "error": None,
            "created_at": now,
            "updated_at": now,
            "ended_at": None,
            "tenant": tenant,
        }
        r = t.runs
        with self._write("admit the run") as conn:
            # The unique partial index decides a race; asking first keeps the common case
            # (a run already open) out of the driver's error path.
            if (
                conn.execute(
                    sa.select(r.c.id).where(
                        r.c.tenant == tenant,
                        r.c.workflow == workflow,
                        r.c.state.not_in(FINAL_STATES),
                    )
                ).first()
                is None
            ):
                inserted = conn.execute(
                    self.hooks.insert(r)
                    .values(**fields)
                    # only the open-run rule is "already open"; a duplicate id is an error
                    .on_conflict_do_nothing(
                        index_elements=[r.c.tenant, r.c.workflow],
                        index_where=r.c.state.not_in(FINAL_STATES),
                    )
                    .returning(r.c.id)
                ).first()
            else:
                inserted = None
        if inserted is None:
            raise RunAlreadyOpen(
                f"a run of {workflow} is already open in tenant {tenant!r}; "
                f"`agac run {workflow}` continues it"
            )
        return RunRecord.from_row(_Fields(fields))

    def update_run(
        self, run_id: str, *, state: str | None = None, settings: RunSettings | None = None
    ) -> None:
        """Move a run that is not final to ``state`` and/or store new settings."""
        fields: dict[str, Any] = {"updated_at": self.clock.time()}
        if state is not None:
            fields["state"] = state
        if settings is not None:
            fields["options"] = settings.to_json()
        with self._write("update the run") as conn:
            conn.execute(t.runs.update().where(t.runs.c.id == run_id).values(**fields))

    def mark_run_needs_pass(self, workflow: str, *, tenant: str) -> None:
        """A change made outside a run (``agac batch resolve``) may let units move: the
        tenant's open run of the workflow, if it was waiting on batches, walks its records
        again when it next runs, and workers look at its waiting shards now."""
        s, r = t.shards, t.runs
        mine = (r.c.tenant == tenant, r.c.workflow == workflow)
        with self._write("update the run") as conn:
            conn.execute(
                r.update()
                .where(*mine, r.c.state == "waiting")
                .values(state="running", updated_at=self.clock.time())
            )
            open_runs = sa.select(r.c.id).where(*mine, r.c.state.not_in(FINAL_STATES))
            woken = conn.execute(
                s.update()
                .where(s.c.run_id.in_(open_runs), s.c.state == "todo")
                .values(ready_at=-1.0)
            ).rowcount
            if woken:
                self.hooks.notify(conn)

    def end_run(self, run_id: str, state: str, error: str | None = None) -> bool:
        """Set a final state once; a run already final is never changed (returns False)."""
        now = self.clock.time()
        with self._write("end the run") as conn:
            res = conn.execute(
                t.runs.update()
                .where(t.runs.c.id == run_id, t.runs.c.state.not_in(FINAL_STATES))
                .values(state=state, ended_at=now, updated_at=now, error=error)
            )
            return res.rowcount == 1

    def discard_run(self, run_id: str, lease_token: int) -> bool:
        """Undo the admission of a run that never started executing: its carried outcomes,
        events, action states, fan-out counts, its lease and its row go.

        Only the process that admitted the run and then took its lease may discard it, and
        only while nobody took the lease since: ``lease_token`` must still be the lease's
        token (a compare-and-set in the same transaction), so a process that continued
        the run in the meantime keeps it. Refused (False, nothing deleted) when the lease
        moved on, or when anything shows the run did start: usage, batches, effects,
        proposals."""
        lease = run_lease(run_id)
        with self._write("discard the run") as conn:
            # First statement: it takes the write lock (SQLite) or the lease's row lock
            # (PostgreSQL), so nobody takes the lease until this transaction ends.
            held = conn.execute(
                t.leases.update()
                .where(t.leases.c.name == lease, t.leases.c.token == lease_token)
                .values(token=lease_token)
            ).rowcount
            if held != 1:
                return False
            for table in (t.usage, t.batches, t.effects, t.approvals):
                if (
                    conn.execute(
                        sa.select(sa.literal(1)).where(table.c.run_id == run_id).limit(1)
                    ).first()
                    is not None
                ):
                    return False
            for table in (t.outcomes, t.events, t.run_actions, t.fanouts):
                conn.execute(table.delete().where(table.c.run_id == run_id))
            conn.execute(t.runs.delete().where(t.runs.c.id == run_id))
            conn.execute(t.leases.delete().where(t.leases.c.name == lease))
            return True

    def get_run(self, run_id: str, *, tenants: Tenants = None) -> RunRecord | None:
        """The run with id ``run_id``, or the only one whose id starts with it (at least
        four characters); only of ``tenants`` when given."""
        runs = t.runs
        mine = tenant_condition(tenants)
        with self._read() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.id == run_id, mine)).first()
            if row is None and len(run_id) >= 4:
                rows = conn.execute(
                    sa.select(runs).where(runs.c.id.startswith(run_id), mine).limit(2)
                ).all()
                row = rows[0] if len(rows) == 1 else None
            return _record(row)

    def open_run(self, workflow: str, *, tenant: str) -> RunRecord | None:
        """The tenant's run of the workflow that is not final (there is at most one)."""
        with self._read() as conn:
            return _record(
                conn.execute(
                    sa.select(t.runs)
                    .where(
                        t.runs.c.tenant == tenant,
                        t.runs.c.workflow == workflow,
                        t.runs.c.state.not_in(FINAL_STATES),
                    )
                    .order_by(t.runs.c.created_at.desc())
                ).first()
            )

    def latest_run(self, workflow: str, *, tenant: str, final: bool = False) -> RunRecord | None:
        """The tenant's newest run of the workflow (final only, with ``final``)."""
        q = sa.select(t.runs).where(t.runs.c.tenant == tenant, t.runs.c.workflow == workflow)
        if final:
            q = q.where(t.runs.c.state.in_(FINAL_STATES))
        with self._read() as conn:
            return _record(conn.execute(q.order_by(t.runs.c.created_at.desc()).limit(1)).first())

    def list_runs(
        self, workflow: str | None = None, limit: int = 50, *, tenants: Tenants = None
    ) -> list[RunRecord]:
        """Runs, newest first: of ``workflow`` and of ``tenants`` when given."""
        q = (
            sa.select(t.runs)
            .where(tenant_condition(tenants))
            .order_by(t.runs.c.created_at.desc())
            .limit(limit)
        )
        if workflow:
            q = q.where(t.runs.c.workflow == workflow)
        with self._read() as conn:
            return [RunRecord.from_row(r) for r in conn.execute(q).all()]

    def list_open_runs(self) -> list[RunRecord]:
        """Every run that is not final, oldest first (workers sweep them)."""
        with self._read() as conn:
            return [
                RunRecord.from_row(r)
                for r in conn.execute(
                    sa.select(t.runs)
                    .where(t.runs.c.state.not_in(FINAL_STATES))
                    .order_by(t.runs.c.created_at)
                ).all()
            ]

    def prune_runs(self, run_ids: Sequence[str]) -> dict[str, int]:
        """``agac gc``: delete the outcomes, events, action states and tool-loop turns of
        these runs and mark them pruned; the runs' rows, their usage (the cost ledger),
        answers, tool results, batches and effects stay. Input snapshots no run still needs
        go too."""
        counts = {"runs": 0, "outcomes": 0, "events": 0, "turns": 0, "records": 0}
        if not run_ids:
            return counts
        with self._write("prune old runs") as conn:
            for i in range(0, len(run_ids), 500):
                part = list(run_ids[i : i + 500])
                counts["outcomes"] += conn.execute(
                    t.outcomes.delete().where(t.outcomes.c.run_id.in_(part))
                ).rowcount
                counts["events"] += conn.execute(
                    t.events.delete().where(t.events.c.run_id.in_(part))
                ).rowcount
                counts["turns"] += conn.execute(
                    t.turns.delete().where(t.turns.c.run_id.in_(part))
                ).rowcount
                conn.execute(t.fanouts.delete().where(t.fanouts.c.run_id.in_(part)))
                conn.execute(t.run_actions.delete().where(t.run_actions.c.run_id.in_(part)))
                for row in conn.execute(
                    sa.select(t.runs.c.id, t.runs.c.options).where(t.runs.c.id.in_(part))
                ).all():
                    settings = RunSettings.from_json(row.options).pruned_at(self.clock.time())
                    conn.execute(
                        t.runs.update()
                        .where(t.runs.c.id == row.id)
                        .values(options=settings.to_json())
                    )
                    counts["runs"] += 1
            kept = {
                r.snapshot_id
                for r in conn.execute(sa.select(t.runs.c.snapshot_id, t.runs.c.options)).all()
                if RunSettings.from_json(r.options).pruned is None
            }
            orphans = [
                r[0] for r in conn.execute(sa.select(t.snapshots.c.id)).all() if r[0] not in kept
            ]
            for snap in orphans:
                counts["records"] += conn.execute(
                    t.records.delete().where(t.records.c.snapshot_id == snap)
                ).rowcount
                conn.execute(
                    t.snapshot_attachments.delete().where(
                        t.snapshot_attachments.c.snapshot_id == snap
                    )
                )
                conn.execute(t.snapshots.delete().where(t.snapshots.c.id == snap))
        return counts

    def set_action_state(self, run_id: str, action: str, state: str, error: str | None) -> None:
        ins = self.hooks.insert(t.run_actions).values(
            run_id=run_id, action=action, state=state, error=error, updated_at=self.clock.time()
        )
        stmt = ins.on_conflict_do_update(
            index_elements=["run_id", "action"],
            set_={"state": state, "error": error, "updated_at": self.clock.time()},
        )
        with self._write("record the action state") as conn:
            conn.execute(stmt)

    def action_states(self, run_id: str) -> dict[str, tuple[str, str | None]]:
        with self._read() as conn:
            rows = conn.execute(
                sa.select(
                    t.run_actions.c.action, t.run_actions.c.state, t.run_actions.c.error
                ).where(t.run_actions.c.run_id == run_id)
            ).all()
        return {r.action: (r.state, r.error) for r in rows}

    def runs_of_unit(
        self, unit_key: str, workflow: str | None, *, tenants: Tenants = None
    ) -> list[RunRecord]:
        """Runs with an outcome for ``unit_key`` (of ``workflow``, of ``tenants``), newest first."""
        q = (
            sa.select(t.runs)
            .join(t.outcomes, t.outcomes.c.run_id == t.runs.c.id)
            .where(t.outcomes.c.unit_key == unit_key, tenant_condition(tenants))
            .distinct()
            .order_by(t.runs.c.created_at.desc())
        )
        if workflow:
            q = q.where(t.runs.c.workflow == workflow)
        with self._read() as conn:
            return [RunRecord.from_row(r) for r in conn.execute(q).all()]
