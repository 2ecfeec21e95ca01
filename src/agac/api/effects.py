"""Side effects for people (E1, E2): list them, settle one left ``unknown``, run a
declared compensation on request — only the caller's tenants' effects (T2); another
tenant's is not found."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, reading, scope_of, workflow_name

if TYPE_CHECKING:
    from agac.api.projects import Principal
    from agac.store.repository import Store

__all__ = ["effects_compensate", "effects_list", "effects_resolve"]


def effects_list(
    ref: str | None = None,
    project: ProjectRef = None,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> list[dict[str, Any]]:
    """``agac effects list [WF]``: every recorded side effect (E1, E2) of the caller's
    tenants, oldest first."""
    from agac.engine.approvals.effects import effect_dict

    with reading(project, store) as (proj, st):
        name = workflow_name(ref, proj) if ref else None
        tenants = scope_of(proj, tenant, principal).visible
        return [effect_dict(r) for r in st.list_effects(name, tenants=tenants)]


def effects_resolve(
    ref: str,
    done: bool,
    project: ProjectRef = None,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """``agac effects resolve ID --done|--not-done``: settle an effect left ``unknown`` (E2)."""
    from agac.engine.approvals.effects import resolve_effect

    with reading(project, store, writes=True) as (proj, st):
        return resolve_effect(st, ref, done, tenants=scope_of(proj, tenant, principal).visible)


def effects_compensate(
    ref: str,
    project: ProjectRef = None,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """``agac effects compensate ID``: run the declared compensation, once, on request."""
    from agac.engine.approvals.effects import compensate_effect

    with reading(project, store, writes=True) as (proj, st):
        return compensate_effect(proj, st, ref, tenants=scope_of(proj, tenant, principal).visible)
