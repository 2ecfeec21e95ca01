"""What a run waits for: its batches still out and each input file a batch action cannot
send yet (B4, B0), the units waiting on people's approval (A1), and the effects a person
settles (E2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agac.engine.report.jsondoc import ABSENT_WHEN_EMPTY
from agac.engine.requests import effect_id
from agac.jsontext import loads
from agac.store.values import FINAL_STATES

if TYPE_CHECKING:
    from agac.engine.graph import RunGraph
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = [
    "ApprovalWait",
    "PendingProposal",
    "WaitingRow",
    "awaiting_approval",
    "unknown_effects",
    "waiting_on",
]


@dataclass(frozen=True)
class WaitingRow:
    """A batch still out (``batch_id`` None for an intent the provider may not have;
    ``status``: the provider's last word), or an input file a batch action cannot send
    yet (B4: ``batch_id``, ``key`` and ``status`` None, ``state`` ``waiting``,
    ``waits_on``: the ids of the batches upstream still out)."""

    action: str
    file: str
    batch_id: str | None
    key: str | None
    state: str
    status: str | None
    waits_on: tuple[str, ...] = field(default=(), metadata=ABSENT_WHEN_EMPTY)


@dataclass(frozen=True)
class PendingProposal:
    """One proposal waiting on a person's decision."""

    id: str
    action: str
    record: str
    expires_at: float | None


@dataclass(frozen=True)
class ApprovalWait:
    """A1: the units waiting on people (counted in ``pending``), per action, with the first
    proposals."""

    units: int
    actions: dict[str, int]
    proposals: tuple[PendingProposal, ...]


def waiting_on(store: Store, run: RunRecord, graph: RunGraph) -> tuple[WaitingRow, ...]:
    """Every batch of the run's actions still out, and, while the run is not final, each
    input file a batch action cannot send yet because batches upstream of it for that
    file are still out (B4). A final run's batches still out are adopted by the next run
    (B0)."""
    order = {name: i for i, name in enumerate(graph.order)}
    out = sorted(
        (
            b
            for b in store.list_batches(run.workflow, tenants=(run.tenant,), open_only=True)
            if b.action in order
        ),
        key=lambda b: (order[b.action], b.file, b.part),
    )
    rows = [
        WaitingRow(b.action, b.file, b.provider_batch_id, b.key, b.state, b.raw_status) for b in out
    ]
    ids: dict[tuple[str, str], list[str]] = {}
    for b in out:
        ids.setdefault((b.action, b.file), []).append(b.provider_batch_id or b.key)
    if run.state in FINAL_STATES or not ids:
        return tuple(rows)
    info = store.snapshot_info(run.snapshot_id)
    files = [f["file"] for f in loads(info.files)] if info else []
    for a in graph.actions:
        if a.kind != "llm" or a.run_mode != "batch":
            continue
        for file in files:
            upstream = tuple(i for anc in a.ancestors for i in ids.get((anc, file), []))
            if upstream and (a.name, file) not in ids:
                rows.append(WaitingRow(a.name, file, None, None, "waiting", None, upstream))
    return tuple(rows)


def awaiting_approval(store: Store, run: RunRecord) -> ApprovalWait | None:
    """A1: the units of a run not final that wait on a person's decision; None if none."""
    if run.state in FINAL_STATES:
        return None
    awaiting = store.count_proposals(run.id, ("pending",))
    if not awaiting:
        return None
    proposals = store.list_proposals(
        run_id=run.id, tenants=(run.tenant,), states=("pending",), limit=20
    )
    return ApprovalWait(
        units=sum(awaiting.values()),
        actions=awaiting,
        proposals=tuple(
            PendingProposal(p.id, p.action, p.unit_key, p.expires_at) for p in proposals
        ),
    )


def unknown_effects(store: Store, run: RunRecord) -> tuple[str, ...]:
    """E2: the ids of the workflow's effects whose outcome is unknown (a person settles
    them: ``agac effects resolve``)."""
    return tuple(
        effect_id(e.key)
        for e in store.list_effects(run.workflow, tenants=(run.tenant,), states=("unknown",))
    )
