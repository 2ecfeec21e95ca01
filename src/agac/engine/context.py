"""What a tool function receives besides its inputs (docs/workflow-reference.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agac.jsontext import JSON
from agac.tenants import DEFAULT_TENANT

__all__ = ["ToolContext"]


@dataclass(frozen=True)
class ToolContext:
    """Passed as ``fn(inputs, ctx)``. ``idempotency_key`` is stable for the same
    (tenant, workflow, action, record key, arguments) across retries, restarts and runs,
    and starts with the run's ``tenant`` (T2).
    ``record_key`` is the record's key; ``item_key`` the fan-out item's (``<record>/<i>``)
    or None. At a join, ``fulfilled`` (``{key, index, output}``) and ``rejected``
    (``{key, index, action, reason}``) are its items in request order (docs/workflow-reference.md, Fan-out and join)."""

    run_id: str
    workflow: str
    action: str
    record_key: str
    item_key: str | None
    attempt: int
    idempotency_key: str
    fulfilled: list[JSON] = field(default_factory=list)
    rejected: list[JSON] = field(default_factory=list)
    tenant: str = DEFAULT_TENANT
