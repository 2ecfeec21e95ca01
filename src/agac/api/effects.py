"""Side effects for people (E1, E2): list them, settle one left ``unknown``, run a
declared compensation on request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, reading, workflow_name

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = ["effects_compensate", "effects_list", "effects_resolve"]


def effects_list(ref: str | None = None, project: ProjectRef = None, *,
                 store: Store | None = None) -> list[dict[str, Any]]:
    """``agac effects list [WF]``: every recorded side effect (E1, E2), oldest first."""
    from agac.engine.effects import effect_dict

    with reading(project, store) as (proj, st):
        name = workflow_name(ref, proj) if ref else None
        return [effect_dict(r) for r in st.list_effects(name)]


def effects_resolve(ref: str, done: bool, project: ProjectRef = None, *,
                    store: Store | None = None) -> dict[str, Any]:
    """``agac effects resolve ID --done|--not-done``: settle an effect left ``unknown`` (E2)."""
    from agac.engine.effects import resolve_effect

    with reading(project, store, writes=True) as (_proj, st):
        return resolve_effect(st, ref, done)


def effects_compensate(ref: str, project: ProjectRef = None, *,
                       store: Store | None = None) -> dict[str, Any]:
    """``agac effects compensate ID``: run the declared compensation, once, on request."""
    from agac.engine.effects import compensate_effect

    with reading(project, store, writes=True) as (proj, st):
        return compensate_effect(proj, st, ref)
