"""Human approval during a run (A1-A3): each unit of an action with ``approval:`` waits
for a person before it acts.

For one unit, after its guard (engine/walk/units.py calls :meth:`ApprovalGate.gate`):

1. its arguments are rendered (a tool's inputs, an llm action's request) and its
   *subject* computed (engine/proposals.py); a failure carried from the previous run
   with the same subject is carried (R1 c, engine/decision.py ``carried_failure``);
2. the latest proposal of that subject decides, once its signatures check out (an
   altered one is marked ``altered`` and never acted on):

   - ``pending``: the unit waits (it stays pending; the run parks ``awaiting_approval``
     when nothing else can move) — or, past ``expires_at``, the proposal expires;
   - ``approved``: the decider is checked against the run's approvers again, with the
     groups of ``agac.yml`` as they are now (A3; if no longer one, the approval is
     ``revoked`` and a new proposal is made); the run records that it uses the approval
     (S1, before acting) and the unit acts with exactly the approved arguments, drawing
     on the run's budget like any call (R5);
   - ``rejected`` / ``expired``: the unit fails ``approval_rejected`` /
     ``approval_expired``, or the run ends (``on_reject: fail_run`` -> ``failed``,
     ``on_expire: time_out_run`` -> ``timed_out``).

   A decision counts for the run that first acts on it (``used_by``); a retry (R2) of a
   rejected or expired unit therefore gets a new proposal;
3. with no live proposal, a unit that would not act — its answer, tool result or effect
   receipt is already stored — goes on without one (nothing is sent or done); otherwise
   a proposal is stored and signed (event ``approval_requested``) and the unit waits —
   unless the deadline passed (skipped ``deadline``) or the run is stopping (it stays
   pending), as engine/decision.py ``before_proposal`` decides.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from agac.engine.approvals.proposals import (
    approver_refusal,
    content_hash,
    decide_hint,
    load_secret,
    new_proposal_id,
    request_from,
    sign,
    subject_of,
    tampered,
    unit_arguments,
)
from agac.engine.crashpoints import maybe_crash
from agac.engine.decision import Settle, before_proposal, carried_failure, own_item
from agac.engine.ports import Act
from agac.engine.requests import build_request, effect_key, tool_input_hash, tool_reuse_key
from agac.engine.values import Halt
from agac.jsontext import loads
from agac.providers.base import canonical_json
from agac.tenants import DEFAULT_TENANT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.engine import Row

    from agac.clock import Clock
    from agac.config.project import Project
    from agac.engine.actions import ActionRuntime
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.outcomes.writer import OutcomeWriter
    from agac.engine.ports import UnitContext
    from agac.engine.values import RunControl, Settled, UnitRecord
    from agac.providers.base import Request
    from agac.store.repository import Store
    from agac.store.values import RunState

__all__ = ["ApprovalGate"]

_USABLE_EFFECT_STATES = ("succeeded", "done", "compensated", "started", "unknown")
"""Effect states in which the effect's own rules decide (E1/E2), not a new approval."""


class ApprovalGate:
    """The approval side of one run (implements :class:`agac.engine.ports.Approvals`)."""

    def __init__(
        self,
        project: Project,
        *,
        run_id: str,
        workflow: str,
        tenant: str,
        store: Store,
        gateway: StoreGateway,
        out: OutcomeWriter,
        control: RunControl,
    ) -> None:
        self.project = project
        self.run_id = run_id
        self.workflow = workflow
        self.tenant = tenant
        """The run's tenant: its proposals are looked up and made in it (T2)."""
        self.store = store
        self.gateway = gateway
        self.out = out
        self.control = control
        self.clock: Clock = control.clock
        self.secret = load_secret(project.root)
        self.waiting: dict[tuple[str, str], str] = {}
        """(action, unit key) -> id of the proposal the unit waits on, in this pass."""
        self.halt: Halt | None = None
        """(final state, why) when a decision ends the whole run (fail_run, time_out_run)."""

    # -- the run loop's view ----------------------------------------------------------------

    def begin_pass(self) -> None:
        self.waiting.clear()

    def waiting_lines(self) -> list[str]:
        per_action: dict[str, int] = {}
        for action, _ in self.waiting:
            per_action[action] = per_action.get(action, 0) + 1
        wf = (
            self.workflow
            if self.tenant == DEFAULT_TENANT
            else f"{self.workflow} --tenant {self.tenant}"
        )
        return [
            f"{action}: {n} unit{'s' if n != 1 else ''} awaiting approval; "
            f"`agac approvals list {wf}` shows them, {decide_hint(self.project)} decides"
            for action, n in sorted(per_action.items())
        ]

    # -- one unit -------------------------------------------------------------------------------

    async def gate(
        self, ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, view: dict[str, Any]
    ) -> Settled | Act | None:
        """Settled: the unit's outcome without acting; Act: act with the approved
        arguments (or as rendered, when it would not act anyway); None: it waits."""
        action = rt.action
        request = build_request(rt, view) if action.kind == "llm" else None
        arguments = unit_arguments(action, view, request)
        subject = subject_of(self.workflow, action, rec.key, arguments)
        carried = carried_failure(ctx.memory.carried.get((rt.name, rec.key)), subject)
        if carried is not None:
            return await self.out.decided(rt, rec, carried)
        rows = await self.gateway.call(
            self.store.unit_proposals, self.workflow, rt.name, rec.key, tenant=self.tenant
        )
        latest = await self._trusted(rt, rec, _latest(rows, subject))
        if latest is not None and latest.state == "pending":
            if self.clock.time() < latest.expires_at:
                if latest.run_id != self.run_id:
                    await self.gateway.call(
                        self.store.adopt_proposal, latest.id, self.run_id, lease=self.gateway.fence
                    )
                self.waiting[(rt.name, rec.key)] = latest.id
                return None
            await self.gateway.call(
                self.store.change_proposal,
                latest.id,
                ["pending"],
                state="expired",
                lease=self.gateway.fence,
            )
            latest = await self.gateway.call(self.store.get_proposal, latest.id)
        if latest is not None and latest.used_by in (None, self.run_id):
            if latest.state in ("rejected", "expired"):
                return await self._refused(rt, rec, latest, subject)
            if latest.state == "approved" and await self._still_approver(rt, rec, latest):
                return await self._act(rt, rec, latest, view, request)
        if await self._would_not_act(ctx, rt, rec, request, arguments):
            return Act(view)
        first = before_proposal(
            deadline_passed=self.control.deadline_passed(), stopping=self.control.stopping
        )
        if isinstance(first, Settle):
            return await self.out.decided(rt, rec, first)
        if first is not None:
            return None  # the run is stopping: the next run proposes it
        await self._propose(rt, rec, subject, arguments)
        return None

    async def _trusted(self, rt: ActionRuntime, rec: UnitRecord, row: Row | None) -> Row | None:
        """``row``, or None when its content or decision does not match its signatures (it
        is then marked ``altered``: never acted on, a new proposal is made)."""
        if row is None or row.state in ("superseded", "withdrawn", "revoked", "altered"):
            return None
        why = tampered(self.secret, row)
        if why is None:
            return row
        await self.gateway.call(
            self.store.change_proposal,
            row.id,
            [row.state],
            state="altered",
            lease=self.gateway.fence,
        )
        await self.out.event("approval_altered", rt.name, rec.key, proposal=row.id, why=why)
        return None

    async def _still_approver(self, rt: ActionRuntime, rec: UnitRecord, row: Row) -> bool:
        """A3, T3: the decider is still one of the run's approvers for this action — and,
        with ``identity: login``, still an active user in the run's tenant — now, when the
        unit is about to act."""
        spec = rt.action.approval
        assert spec is not None
        refusal = await self.gateway.call(
            approver_refusal, self.project, self.store, row.decided_by, spec.approvers, self.tenant
        )
        if loads(row.approvers) == list(spec.approvers) and refusal is None:
            return True
        why = (
            f"{row.decided_by} is no longer an approver of {rt.name} "
            f"({', '.join(spec.approvers)})" + (f": {refusal}" if refusal else "")
        )
        await self.gateway.call(
            self.store.change_proposal,
            row.id,
            ["approved"],
            state="revoked",
            reason=why,
            lease=self.gateway.fence,
        )
        await self.out.event("approval_revoked", rt.name, rec.key, proposal=row.id, why=why)
        return False

    async def _act(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        row: Row,
        view: dict[str, Any],
        rendered: Request | None,
    ) -> Act | None:
        if not await self.gateway.call(
            self.store.use_proposal, row.id, self.run_id, lease=self.gateway.fence
        ):
            return None  # pragma: no cover - one open run per workflow: nobody else uses it
        await self.gateway.durable()  # the use is stored before the unit acts (S1)
        maybe_crash("approval_acting")  # the run acts on the approval; no outcome yet
        await self.out.event(
            "approval_applied", rt.name, rec.key, proposal=row.id, by=row.decided_by
        )
        arguments = loads(row.arguments)
        if rt.action.kind == "tool":
            return Act(arguments)
        assert rendered is not None
        return Act(view, request_from(rendered, arguments))

    async def _refused(self, rt: ActionRuntime, rec: UnitRecord, row: Row, subject: str) -> Settled:
        spec = rt.action.approval
        assert spec is not None
        await self.gateway.call(
            self.store.use_proposal, row.id, self.run_id, lease=self.gateway.fence
        )
        if row.state == "rejected":
            reason, policy = "approval_rejected", spec.on_reject
            detail = f"proposal {row.id} was rejected by {row.decided_by}: {row.reason}"
            halt: tuple[RunState, str] | None = (
                ("failed", "on_reject: fail_run") if policy == "fail_run" else None
            )
        else:
            at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row.expires_at))
            reason, policy = "approval_expired", spec.on_expire
            detail = f"proposal {row.id} expired at {at} without a decision"
            halt = ("timed_out", "on_expire: time_out_run") if policy == "time_out_run" else None
        settled = await self.out.settle(rt, rec, "failed", reason, detail, fingerprint=subject)
        if halt is not None and self.halt is None:
            self.halt = Halt(halt[0], f"{detail} ({rt.name}, record {rec.key}; {halt[1]})")
            self.control.stop()  # send nothing more; what is in flight settles
        return settled

    async def _would_not_act(
        self,
        ctx: UnitContext,
        rt: ActionRuntime,
        rec: UnitRecord,
        request: Any,
        arguments: dict[str, Any],
    ) -> bool:
        """Whether the unit, as rendered, would settle without acting: its answer is stored
        (S5), a failure is carried (R1 c), its tool result is cached, or its effect's own
        rules decide (E1/E2). Mirrors the keys of engine/walk/units.py."""
        action = rt.action
        if action.kind == "llm":
            _, fp = rt.identify(request, rec.key)
            if carried_failure(ctx.memory.carried.get((rt.name, rec.key)), fp) is not None:
                return True
            if (
                ctx.batch is not None
                and own_item(ctx.batch.items_of(rt, rec.key), self.run_id) is not None
            ):
                return True  # staged or sent by this run from an approved proposal
            return not ctx.fresh and await ctx.lookups.lookup_answer(fp) is not None
        inputs_json = canonical_json(arguments)
        input_hash = tool_input_hash(action.function, inputs_json)
        if action.effect is not None:
            key = effect_key(self.tenant, self.workflow, action.name, rec.key, input_hash)
            effect = await self.gateway.call(self.store.get_effect, key)
            return effect is not None and effect.state in _USABLE_EFFECT_STATES
        if action.cache and not ctx.fresh:
            reuse_key = tool_reuse_key(rt, self.workflow, rec.key, inputs_json)
            return await ctx.lookups.lookup_tool_result(reuse_key) is not None
        return False

    async def _propose(
        self, rt: ActionRuntime, rec: UnitRecord, subject: str, arguments: dict[str, Any]
    ) -> None:
        spec = rt.action.approval
        assert spec is not None
        now = round(self.clock.time(), 3)
        row: dict[str, Any] = {
            "id": new_proposal_id(),
            "tenant": self.tenant,
            "workflow": self.workflow,
            "action": rt.name,
            "unit_key": rec.key,
            "seq": rec.seq,
            "run_id": self.run_id,
            "subject": subject,
            "parent": None,
            "arguments": canonical_json(arguments),
            "policy_version": spec.policy_version,
            "approvers": canonical_json(list(spec.approvers)),
            "proposed_by": None,
            "expires_at": round(now + spec.expires_in, 3),
            "state": "pending",
            "decided_by": None,
            "decided_at": None,
            "reason": None,
            "decision_signature": None,
            "used_by": None,
            "used_at": None,
            "created_at": now,
            "updated_at": now,
        }
        row["content_hash"] = content_hash(row)
        row["signature"] = sign(self.secret, "proposal:" + row["content_hash"])
        await self.gateway.call(self.store.insert_proposal, row, lease=self.gateway.fence)
        await self.out.event(
            "approval_requested",
            rt.name,
            rec.key,
            proposal=row["id"],
            approvers=list(spec.approvers),
            expires_at=row["expires_at"],
            policy_version=spec.policy_version,
        )
        maybe_crash("approval_proposed")  # the proposal is durable; the unit waits
        self.waiting[(rt.name, rec.key)] = row["id"]


def _latest(rows: Sequence[Row], subject: str) -> Row | None:
    """The newest proposal of ``subject`` that no revision replaced."""
    chain = [r for r in rows if r.subject == subject]
    parents = {r.parent for r in chain if r.parent}
    leaves = [r for r in chain if r.id not in parents]
    return max(leaves, key=lambda r: r.created_at) if leaves else None
