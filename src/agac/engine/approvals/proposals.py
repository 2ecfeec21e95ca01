"""Proposals (A1, A2): what a person approves, and how agac knows it was not altered.

**What is approved.** A proposal is bound to the exact arguments of one unit's action:

- a tool action: the inputs its function would be called with (``fn(inputs, ctx)``);
- an llm action: the rendered request: ``system`` and ``prompt`` (the rendered
  messages), ``max_tokens`` and ``temperature``, plus the ``model`` it goes to.

``agac revise ID --set field=value`` may change any existing field of a tool's inputs
(a dotted path: ``reply.text``) and, for an llm action, ``system``, ``prompt``,
``max_tokens`` and ``temperature`` (never the model, nor the schema). The unit then acts
with exactly the approved arguments.

**Signing.** A proposal's content (ids, unit, arguments, policy version, approvers,
expiry, revision parent) is hashed (``content_hash``) and the hash signed with HMAC-SHA256
under the project secret (``signature``); a decision (state, who, when, why) is signed
the same way (``decision_signature``). The secret comes from ``AGAC_SECRET`` or from
``.agac/secret`` under the project root, generated on first need with mode 0600; it never
enters the store, events or logs. A row whose content or decision does not match its
signature is *altered*: refused to people, never acted on by a run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.providers.base import Message, Request, canonical_json
from agac.tenants import DEFAULT_TENANT

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sqlalchemy.engine import Row

    from agac.config.model import Action
    from agac.config.project import Project
    from agac.store.repository import Store

__all__ = [
    "LLM_REVISABLE",
    "approver_refusal",
    "arguments_hash",
    "content_hash",
    "decide_hint",
    "decision_signature",
    "expand_approvers",
    "load_secret",
    "new_proposal_id",
    "proposal_dict",
    "request_from",
    "sign",
    "subject_of",
    "tampered",
    "time_text",
    "unit_arguments",
]

LLM_REVISABLE = ("system", "prompt", "max_tokens", "temperature")
"""Fields of an llm proposal that ``--set`` may change."""

SECRET_FILE = ".agac/secret"


def load_secret(root: Path) -> bytes:
    """The signing secret: ``AGAC_SECRET``, else ``.agac/secret`` (created 0600 on first need)."""
    env = os.environ.get("AGAC_SECRET")
    if env:
        return env.encode("utf-8")
    path = root / SECRET_FILE
    if not path.exists():
        # Written whole under a temporary name, then linked into place: two processes
        # creating it at once agree on one secret, and nobody reads a half-written one.
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".secret.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return path.read_bytes().strip()


def new_proposal_id() -> str:
    return secrets.token_hex(8)


def time_text(value: float | None) -> str:
    """Times enter hashes and signatures at millisecond precision (stored rounded)."""
    return "" if value is None else f"{value:.3f}"


def unit_arguments(action: Action, view: dict[str, Any], request: Request | None) -> dict[str, Any]:
    """The arguments a unit would act with: a tool's inputs, an llm action's request."""
    if action.kind == "tool":
        inputs: dict[str, Any] = json.loads(canonical_json(view))
        return inputs
    assert request is not None
    system = next((m.content for m in request.messages if m.role == "system"), None)
    prompt = next(m.content for m in request.messages if m.role == "user")
    return {
        "model": action.model,
        "system": system,
        "prompt": prompt,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }


def request_from(rendered: Request, arguments: dict[str, Any]) -> Request:
    """The request an approved llm proposal sends: the unit's request as rendered (its
    tools, attachments, cache hint, seed and options kept) with the approved text and
    sampling put in, so an unrevised proposal has the fingerprint of the rendered request."""
    messages: list[Message] = []
    if arguments.get("system") is not None:
        messages.append(Message("system", str(arguments["system"])))
    user = next(m for m in rendered.messages if m.role == "user")
    messages.append(replace(user, content=str(arguments["prompt"])))
    return replace(
        rendered,
        messages=tuple(messages),
        max_tokens=int(arguments["max_tokens"]),
        temperature=arguments.get("temperature"),
    )


def arguments_hash(arguments: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(arguments).encode("utf-8")).hexdigest()


def subject_of(workflow: str, action: Action, unit_key: str, arguments: dict[str, Any]) -> str:
    """What a unit asks approval for: the workflow, action, unit, the arguments as rendered,
    the policy version and the approvers. The same subject in a later run means the same
    question, so a proposal still open is reused instead of asked again."""
    assert action.approval is not None
    material = canonical_json(
        [
            workflow,
            action.name,
            unit_key,
            arguments_hash(arguments),
            action.approval.policy_version,
            list(action.approval.approvers),
        ]
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def content_hash(row: Row | Mapping[str, Any]) -> str:
    """The hash of a proposal's content (a Row or a dict with the table's columns). The
    tenant (T2) is part of it when it is not ``default`` — so proposals signed before
    tenants still verify, and a proposal moved to another tenant in the store does not."""
    get = row.get if isinstance(row, dict) else (lambda k: getattr(row, k))
    content = {
        "id": get("id"),
        "workflow": get("workflow"),
        "action": get("action"),
        "unit_key": get("unit_key"),
        "subject": get("subject"),
        "parent": get("parent"),
        "arguments": get("arguments"),
        "policy_version": get("policy_version"),
        "approvers": get("approvers"),
        "proposed_by": get("proposed_by"),
        "expires_at": time_text(get("expires_at")),
        "created_at": time_text(get("created_at")),
    }
    tenant = row.get("tenant") if isinstance(row, dict) else getattr(row, "tenant", None)
    if tenant not in (None, DEFAULT_TENANT):
        content["tenant"] = tenant
    material = canonical_json(content)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def sign(secret: bytes, text: str) -> str:
    return hmac.new(secret, text.encode("utf-8"), hashlib.sha256).hexdigest()


def decision_signature(
    secret: bytes, chash: str, state: str, by: str | None, at: float | None, reason: str | None
) -> str:
    return sign(secret, canonical_json(["decision", chash, state, by, time_text(at), reason]))


def tampered(secret: bytes, row: Row) -> str | None:
    """Why a stored proposal cannot be trusted, or None: its content no longer matches its
    hash or signature, or its decision does not match the decision's signature."""
    chash = content_hash(row)
    if not hmac.compare_digest(chash, row.content_hash):
        return "its content does not match its hash (arguments or terms were changed in the store)"
    if not hmac.compare_digest(sign(secret, "proposal:" + chash), row.signature):
        return "its signature does not match (it was not made by agac with this project's secret)"
    if row.state in ("approved", "rejected"):
        expected = decision_signature(
            secret, chash, row.state, row.decided_by, row.decided_at, row.reason
        )
        if not hmac.compare_digest(expected, row.decision_signature or ""):
            return f"its decision ({row.state}) does not match the decision's signature"
    return None


def decide_hint(project: Project, proposal: str = "ID", verb: str = "approve") -> str:
    """How a person decides on ``proposal`` in this project, never a way it refuses:
    ``--as NAME`` on a local project; the service (or the CLI sending to it) under
    ``identity: login``, where ``--as`` is refused."""
    if project.config.login:
        return (
            f"`agac {verb} {proposal}` with AGAC_SERVER and AGAC_TOKEN set, or the "
            "approvals page of `agac serve`"
        )
    return f"`agac {verb} {proposal} --as NAME`"


def expand_approvers(names: list[str] | tuple[str, ...], project: Project) -> set[str]:
    """The users named, directly or through a group of ``agac.yml`` (as it is now)."""
    groups = project.config.groups if project.config else {}
    users: set[str] = set()
    for name in names:
        users.update(groups.get(name, (name,)))
    return users


def approver_refusal(
    project: Project, store: Store, who: str, approvers: list[str] | tuple[str, ...], tenant: str
) -> str | None:
    """Why ``who`` may not decide on a proposal of a run in ``tenant`` with these
    ``approvers`` — or act on such a decision — as things are now; None when it may (A3, T3).

    With ``identity: login`` the decider must be an active user of the store, in the run's
    tenant, named among the approvers or in one of their groups (groups live in the store).
    Otherwise the approvers are expanded with the groups of ``agac.yml``.
    """
    names = ", ".join(approvers)
    if project.config.login:
        user = store.get_user(who)
        if user is None:
            return f"{who} is not a user of this project (approvers: {names})"
        if not user.active:
            return f"{who} is disabled"
        if tenant not in json.loads(user.tenants):
            return f"{who} is not in tenant {tenant}"
        if who in approvers or set(store.groups_of([who])[who]) & set(approvers):
            return None
        return (
            f"{who} is not an approver (approvers: {names}; a user's groups are set with "
            "`agac users set NAME --group G`)"
        )
    if who in expand_approvers(approvers, project):
        return None
    return f"{who} is not an approver (approvers: {names}; groups are defined in agac.yml)"


def proposal_dict(row: Row, run_state: str | None = None) -> dict[str, Any]:
    return {
        "id": row.id,
        "tenant": row.tenant,
        "workflow": row.workflow,
        "action": row.action,
        "record": row.unit_key,
        "arguments": json.loads(row.arguments),
        "approvers": json.loads(row.approvers),
        "policy_version": row.policy_version,
        "expires_at": row.expires_at,
        "state": row.state,
        "run_id": row.run_id,
        "run_state": run_state,
        "revises": row.parent,
        "proposed_by": row.proposed_by,
        "decided_by": row.decided_by,
        "decided_at": row.decided_at,
        "reason": row.reason,
        "used_by": row.used_by,
        "content_hash": row.content_hash,
        "created_at": row.created_at,
    }
