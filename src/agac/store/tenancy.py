"""Which tenant an object belongs to (DESIGN §13 T2), in one place.

Every run has a tenant; until runs carry a ``tenant`` column it is ``default`` for all of
them. Reads that a principal's tenants limit go through :func:`runs_of_tenants` (a SQL
condition on ``runs``) or :func:`run_tenant` (a loaded row): when the column exists they
read it, so the filter becomes real without changing its callers.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import sqlalchemy as sa

from agac.store import tables as t

__all__ = ["DEFAULT_TENANT", "run_tenant", "runs_of_tenants"]

DEFAULT_TENANT = "default"


def run_tenant(row: Any) -> str:
    """The tenant of a run row (``default`` for a run stored before tenants existed)."""
    return getattr(row, "tenant", None) or DEFAULT_TENANT


def runs_of_tenants(tenants: Collection[str] | None) -> Any:
    """A condition on ``runs`` keeping the runs of ``tenants`` (None: every tenant)."""
    if tenants is None:
        return sa.true()
    column = t.runs.c.get("tenant")
    if column is not None:
        return column.in_(sorted(tenants))
    return sa.true() if DEFAULT_TENANT in tenants else sa.false()
