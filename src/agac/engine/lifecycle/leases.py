"""Owning a run (S3): its lease — owner (host, pid), fencing token, expiry —
taken before it executes, renewed by a heartbeat while it does, and given back after.

A lease whose owner is a dead process on this host is taken over at once; a live owner
elsewhere is waited for (``--wait``) or reported (exit 75). In worker mode the run lease
and the workers' live shard leases exclude each other.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

from agac.engine.outcomes.gateway import Lease
from agac.errors import LeaseHeld, LeaseLost
from agac.store.runs import run_lease

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.values import RunControl
    from agac.store.repository import Store

__all__ = [
    "HEARTBEAT_SECONDS",
    "LEASE_TTL",
    "heartbeat",
    "release_lease",
    "run_process",
    "take_run_lease",
]

LEASE_TTL = 30.0
HEARTBEAT_SECONDS = 10.0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def take_run_lease(store: Store, run_id: str, *, wait: bool) -> Lease:
    """S3: own the run; a dead process on this host is taken over at once."""
    host, pid = socket.gethostname(), os.getpid()

    def may_take(row: Row) -> bool:
        return row.host == host and not _pid_alive(row.pid)

    while True:
        try:
            token = store.acquire_lease(
                run_lease(run_id), host=host, pid=pid, ttl=LEASE_TTL, may_take=may_take
            )
            _no_shard_owners(store, run_id, token)
            return Lease(run_lease(run_id), token, LEASE_TTL)
        except LeaseHeld as exc:
            if not wait:
                raise LeaseHeld(
                    f"run {run_id} is {exc.message}; run again later, or use --wait"
                ) from exc
            store.clock.wait(1.0)


def run_process(store: Store, run_id: str) -> dict[str, Any]:
    """Who runs ``run_id`` now, by its lease: ``{"host", "pid", "lease_expires_at",
    "live"}``. ``live`` is false when no process holds the lease (never taken, given
    back, or expired: its heartbeat stopped) or its holder is a process of this host
    that is gone (killed before its lease ran out)."""
    row = store.get_lease(run_lease(run_id))
    if row is None:
        return {"host": None, "pid": None, "lease_expires_at": None, "live": False}
    live = row.expires_at > store.clock.time()
    if live and row.host == socket.gethostname():
        live = _pid_alive(row.pid)
    return {
        "host": row.host,
        "pid": row.pid,
        "lease_expires_at": row.expires_at,
        "live": live,
    }


def _no_shard_owners(store: Store, run_id: str, token: int) -> None:
    """Worker mode (S3): the run lease and live shard leases of workers exclude
    each other. Expired shard leases are fenced (a paused worker can never write again);
    a live one gives the run lease back and names its worker."""
    if not store.shares_work:
        return
    live = store.fence_shards(run_id)
    if live:
        store.release_lease(run_lease(run_id), token)
        first = live[0]
        raise LeaseHeld(
            f"held by worker {first.owner} (pid {first.pid} on {first.host}) and "
            f"{len(live) - 1} more shard leases"
            if len(live) > 1
            else f"held by worker {first.owner} (pid {first.pid} on {first.host})"
        )


def release_lease(store: Store, lease: Lease) -> None:
    """Give the lease back; if that fails it expires by itself."""
    try:
        store.release_lease(lease.name, lease.token)
    except Exception:  # noqa: BLE001, S110 - the lease expires by itself
        pass


async def heartbeat(
    gateway: StoreGateway, store: Store, run_id: str, control: RunControl, every: float
) -> None:
    """Renew the gateway's lease every ``every`` seconds until cancelled. A lease taken over
    stops the run (LeaseLost); ``agac cancel`` (the run marked ``cancelling``) stops
    sending, and the run ends cancelled."""
    lease = gateway.lease
    if lease is None:
        return
    while True:
        await control.clock.sleep(every)
        try:
            await gateway.call(store.renew_lease, lease.name, lease.token, lease.ttl)
        except LeaseLost:
            control.stop()
            raise
        run = await gateway.call(store.get_run, run_id)
        if run is not None and run.state == "cancelling":
            control.cancel()
