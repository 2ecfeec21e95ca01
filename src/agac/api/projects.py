"""Finding the project, its store and the runs a call names: what every API call starts with.

Each call takes ``project`` (a :class:`Project`, a folder, or None for the working
directory) and, optionally, ``store``: a long-lived store handle (``agac serve``, a
notebook) that the call uses and leaves open. Without one, the call opens the project's
store and closes it when done.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.config.project import Project, find_project, store_url
from agac.errors import UsageError

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = ["ProjectRef", "open_store", "project_of", "reading", "resolve_run", "using",
           "workflow_name"]

ProjectRef = Project | Path | str | None
"""What a call accepts as its project: the project, its folder, or None (found from the
working directory)."""


def project_of(project: ProjectRef) -> Project:
    """The project ``project`` names (found by walking up from the working directory when
    None)."""
    if isinstance(project, Project):
        return project
    return find_project(Path(project) if project else None)


def open_store(project: ProjectRef = None, *, writes: bool = True, wait: bool = False) -> Store:
    """The project's store: ``AGAC_STORE`` wins over ``store:`` in agac.yml (DESIGN §4).
    The caller closes it.

    On a storage point (DESIGN §14) ``writes`` owns the point for this process (exit 75
    naming a live owner, or waiting for it with ``wait``); ``writes=False`` reads a
    private copy and owns nothing. On SQL stores the flags change nothing."""
    from agac.store.factory import open_store as _open

    proj = project_of(project)
    return _open(store_url(proj), proj.config.store_options, writes=writes, wait=wait)


@contextlib.contextmanager
def using(project: ProjectRef, store: Store | None = None, *, writes: bool = True,
          wait: bool = False) -> Iterator[tuple[Project, Store]]:
    """The project and a store for one call: ``store`` when given (left open), else the
    project's, closed afterwards (``writes``, ``wait``: see :func:`open_store`)."""
    proj = project_of(project)
    if store is not None:
        yield proj, store
        return
    opened = open_store(proj, writes=writes, wait=wait)
    try:
        yield proj, opened
    finally:
        opened.close()


@contextlib.contextmanager
def reading(project: ProjectRef, store: Store | None = None, *, writes: bool = False
            ) -> Iterator[tuple[Project, Store]]:
    """As :func:`using`, for reading earlier runs: refused for ``store: memory``, which
    keeps nothing once a run's process ends. ``writes`` for the calls that change them
    (on a storage point they own it meanwhile)."""
    proj = project_of(project)
    if store is None and store_url(proj) == "memory":
        raise UsageError("this project's store is memory: it keeps nothing once a run ends, so "
                         "there is no earlier run to read; use the default SQLite store (remove "
                         "`store: memory` from agac.yml and unset AGAC_STORE) or PostgreSQL")
    with using(proj, store, writes=writes) as opened:
        yield opened


def workflow_name(ref: str, project: ProjectRef = None) -> str:
    """The workflow name for ``ref`` (a name or a path), without requiring it to validate."""
    from agac.config.workflow import find_workflow

    proj = project_of(project)
    try:
        path = find_workflow(ref, proj)
    except Exception:  # noqa: BLE001 - not a workflow reference: treat it as a name
        return ref
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        return str(data.get("name") or Path(path).stem)
    except Exception:  # noqa: BLE001
        return Path(path).stem


def resolve_run(store: Store, proj: Project, ref: str | None) -> Any:
    """A run from a run id (or unique prefix), a workflow name or path, or None (the latest)."""
    if ref is None:
        runs = store.list_runs(limit=1)
        if not runs:
            raise UsageError("no runs yet in this project's store; start one with `agac run WF`")
        return runs[0]
    run_row = store.get_run(ref)
    if run_row is not None:
        return run_row
    name = workflow_name(ref, proj)
    run_row = store.latest_run(name)
    if run_row is None:
        raise UsageError(f"no run of {ref!r} in this project's store; start one with `agac run {ref}`")
    return run_row
