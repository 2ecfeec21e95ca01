"""Looking after the store: prune old runs (``agac gc``) and create or migrate its schema
(``agac store upgrade``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, project_of, reading
from agac.errors import UsageError

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = ["gc", "store_upgrade"]


def gc(keep_runs: int = 10, project: ProjectRef = None, *,
       store: Store | None = None) -> dict[str, Any]:
    """``agac gc``: prune the outcomes and events of all but the newest ``keep_runs`` final
    runs of each workflow; runs not final, answers, the cost ledger, batches and effects
    are kept."""
    from agac.engine.closing import collect_garbage

    if keep_runs < 1:
        raise UsageError("--keep-runs must be at least 1: the latest run is what the next one "
                         "builds on (R1, R2)")
    with reading(project, store) as (_proj, st):
        return collect_garbage(st, keep_runs)


def store_upgrade(project: ProjectRef = None) -> dict[str, Any]:
    """``agac store upgrade``: create or migrate the project's store schema now;
    ``{"store": url, "revision": rev}``."""
    from agac.config.project import store_url
    from agac.store.database import create_store_engine, upgrade

    url = store_url(project_of(project))
    engine = create_store_engine(url)
    try:
        return {"store": url, "revision": upgrade(engine, force=True)}
    finally:
        engine.dispose()
