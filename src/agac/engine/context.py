"""What a tool function receives besides its inputs (DESIGN §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolContext"]


@dataclass(frozen=True)
class ToolContext:
    """Passed as ``fn(inputs, ctx)``. ``idempotency_key`` is stable for the same
    (workflow, action, record key, arguments) across retries, restarts and runs.
    ``fulfilled``/``rejected`` are filled at a join (later feature)."""

    run_id: str
    workflow: str
    action: str
    record_key: str
    item_key: str | None
    attempt: int
    idempotency_key: str
    fulfilled: list[Any] = field(default_factory=list)
    rejected: list[Any] = field(default_factory=list)
