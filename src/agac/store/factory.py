"""Which store a URL names: SQL (SQLite, PostgreSQL, ``memory``) or a storage point.

The one place that tells them apart when opening; everything above calls
:func:`open_store` and gets a :class:`agac.store.repository.Store`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agac.clock import SYSTEM, Clock
from agac.store.points import is_point
from agac.store.repository import Store

__all__ = ["is_point", "open_store"]


def open_store(
    url: str,
    options: Mapping[str, Any] | None = None,
    *,
    writes: bool = True,
    wait: bool = False,
    migrate: bool = True,
    clock: Clock = SYSTEM,
) -> Store:
    """The store at ``url``. On a storage point, ``writes`` owns the point for this process
    (exit 75 naming a live owner; ``wait`` waits for it) and reading restores a private
    copy; on SQL stores both are the same connection."""
    if is_point(url):
        from agac.store.points.store import PointStore

        return PointStore(url, options, writes=writes, wait=wait, migrate=migrate, clock=clock)
    return Store(url, migrate=migrate, clock=clock)
