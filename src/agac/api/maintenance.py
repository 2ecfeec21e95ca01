"""Looking after the store: prune old runs (``agac gc``) and create or migrate its schema
(``agac store upgrade``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, project_of, reading
from agac.errors import UsageError

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = ["gc", "store_info", "store_upgrade"]


def gc(
    keep_runs: int = 10, project: ProjectRef = None, *, store: Store | None = None
) -> dict[str, Any]:
    """``agac gc``: prune the outcomes and events of all but the newest ``keep_runs`` final
    runs of each workflow; runs not final, answers, the cost ledger, batches and effects
    are kept."""
    from agac.engine.lifecycle.closing import collect_garbage

    if keep_runs < 1:
        raise UsageError(
            "--keep-runs must be at least 1: the latest run is what the next one builds on (R1, R2)"
        )
    with reading(project, store, writes=True) as (_proj, st):
        return collect_garbage(st, keep_runs)


def store_upgrade(project: ProjectRef = None) -> dict[str, Any]:
    """``agac store upgrade``: create or migrate the project's store schema now;
    ``{"store": url, "revision": rev}``. On a storage point it owns the point, migrates the
    working copy and stores the result."""
    from agac.config.project import store_url
    from agac.store.database import upgrade
    from agac.store.factory import open_store

    proj = project_of(project)
    url = store_url(proj)
    store = open_store(url, proj.config.store_options, migrate=False)
    try:
        return {"store": url, "revision": upgrade(store.engine, force=True)}
    finally:
        store.close()


def store_info(project: ProjectRef = None) -> dict[str, Any]:
    """``agac store info``: where the state lives and how big it is; for a storage point
    also its owner and lease, snapshot age and log length (read without owning it)."""
    import os
    from pathlib import Path

    from agac.config.project import is_point_url, store_url

    proj = project_of(project)
    url = store_url(proj)
    if is_point_url(url):
        from agac.store.points.store import describe_point

        return describe_point(url, proj.config.store_options)
    if url == "memory":
        return {"store": url, "kind": "memory", "bytes": 0}
    if url.startswith("sqlite"):
        path = Path(url.split(":///", 1)[1])
        size = sum(os.path.getsize(f) for f in (path, Path(f"{path}-wal")) if f.exists())
        return {
            "store": url,
            "kind": "sqlite",
            "path": str(path),
            "exists": path.exists(),
            "bytes": size,
        }
    from sqlalchemy.engine import make_url

    return {"store": make_url(url).render_as_string(hide_password=True), "kind": "postgresql"}
