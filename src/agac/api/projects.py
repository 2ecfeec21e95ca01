"""Finding the project, its store, the caller's tenants and the runs a call names: what
every API call starts with.

Each call takes ``project`` (a :class:`Project`, a folder, or None for the working
directory) and, optionally, ``store``: a long-lived store handle (``agac serve``, a
notebook) that the call uses and leaves open. Without one, the call opens the project's
store and closes it when done.

**Tenants (T2).** Every call that finds a run or an object of a run takes
``tenant`` and ``principal``, read once into a :class:`Scope`: the tenant the call acts
in (a workflow's runs are found, and new runs admitted, in it) and the tenants whose
objects it may see. From the command line that is one tenant — ``--tenant``, else
``AGAC_TENANT``, else ``tenant:`` in agac.yml, else ``default``. A caller of the service
is a *principal*: it sees the tenants it belongs to (``principal.tenants``), and
``tenant`` picks one of them. Another tenant's object is :class:`~agac.errors.NotFound`,
exactly like one that does not exist — never "forbidden" — so the command line and the
service refuse the same things in the same words.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agac.config.project import Project, find_project, project_tenant, store_source, store_url
from agac.errors import NotFound, UsageError
from agac.tenants import check_tenant

if TYPE_CHECKING:
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = [
    "Principal",
    "ProjectRef",
    "Scope",
    "open_store",
    "project_of",
    "reading",
    "resolve_run",
    "scope_of",
    "using",
    "workflow_name",
]

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
    """The project's store: ``AGAC_STORE`` wins over ``store:`` in agac.yml (docs/guarantees.md, The store).
    The caller closes it.

    On a storage point (docs/guarantees.md, Storage points) ``writes`` owns the point for this process (exit 75
    naming a live owner, or waiting for it with ``wait``); ``writes=False`` reads a
    private copy and owns nothing. On SQL stores the flags change nothing."""
    from agac.store.factory import open_store as _open

    proj = project_of(project)
    url = store_url(proj)
    if not writes and _no_store_yet(proj, url):
        url = "memory"  # nothing to read, and a look (plan, batches) creates nothing here
    return _open(url, proj.config.store_options, writes=writes, wait=wait)


def _no_store_yet(proj: Project, url: str) -> bool:
    """True outside a project (no agac.yml here or above) when the default store file does
    not exist: commands that only look never create ``.agac/`` in a folder that is not a
    project (a home folder, say)."""
    if proj.has_file or store_source(proj) != "default":
        return False
    return not Path(url.removeprefix("sqlite:///")).exists()


@contextlib.contextmanager
def using(
    project: ProjectRef, store: Store | None = None, *, writes: bool = True, wait: bool = False
) -> Iterator[tuple[Project, Store]]:
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
def reading(
    project: ProjectRef, store: Store | None = None, *, writes: bool = False
) -> Iterator[tuple[Project, Store]]:
    """As :func:`using`, for reading earlier runs: refused for ``store: memory``, which
    keeps nothing once a run's process ends. ``writes`` for the calls that change them
    (on a storage point they own it meanwhile)."""
    proj = project_of(project)
    if store is None and _no_store_yet(proj, store_url(proj)):
        raise UsageError(
            f"no agac project here: no agac.yml in {proj.root} or above, and no store "
            f"({proj.root / '.agac' / 'agac.db'}) to read earlier runs from; run this from "
            "the project's folder (or pass its folder), or set AGAC_STORE"
        )
    if store is None and store_url(proj) == "memory":
        raise UsageError(
            "this project's store is memory: it keeps nothing once a run ends, so "
            "there is no earlier run to read; use the default SQLite store (remove "
            "`store: memory` from agac.yml and unset AGAC_STORE) or PostgreSQL"
        )
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


class Principal(Protocol):
    """Who calls, as the service knows them (``agac serve``'s signed-in user or token):
    what the library needs of them is the tenants they belong to."""

    @property
    def tenants(self) -> Collection[str]: ...


@dataclass(frozen=True)
class Scope:
    """The tenants of one call (T2): ``tenant``, the one it acts in (None when a principal
    belongs to several and named none), and ``visible``, those whose objects it may see."""

    tenant: str | None
    visible: frozenset[str]

    def acting(self) -> str:
        """The tenant to admit in or find a workflow's runs in; UsageError when the
        caller belongs to several and named none."""
        if self.tenant is None:
            raise UsageError(
                f"name the tenant to act in (tenant=…): you are in "
                f"{', '.join(sorted(self.visible))}"
            )
        if self.tenant not in self.visible:
            raise NotFound(f"no tenant {self.tenant!r} among yours")
        return self.tenant

    def sees(self, tenant: str) -> bool:
        return tenant in self.visible

    @property
    def label(self) -> str:
        """How messages name where a lookup looked."""
        names = sorted(self.visible)
        return (
            f"tenant {names[0]!r}" if len(names) == 1 else "your tenants" if names else "no tenant"
        )


def scope_of(
    project: Project, tenant: str | None = None, principal: Principal | None = None
) -> Scope:
    """The :class:`Scope` of a call: without a principal, the one tenant ``tenant`` or
    ``AGAC_TENANT`` or ``tenant:`` in agac.yml names (else ``default``); with one, its
    tenants — narrowed to ``tenant`` when given (a tenant it is not in leaves nothing to
    see, so every lookup is "not found")."""
    if principal is None:
        chosen = project_tenant(project, tenant)
        return Scope(chosen, frozenset((chosen,)))
    mine = frozenset(principal.tenants)
    if tenant:
        try:
            check_tenant(tenant)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        return Scope(tenant, mine & {tenant})
    return Scope(next(iter(mine)) if len(mine) == 1 else None, mine)


def resolve_run(store: Store, proj: Project, ref: str | None, scope: Scope) -> RunRecord:
    """A run of the scope's tenants from a run id (or unique prefix), a workflow name or
    path (its latest run), or None (the latest run). Another tenant's run is not found."""
    if ref is None:
        runs = store.list_runs(limit=1, tenants=scope.visible)
        if not runs:
            raise NotFound(f"no runs yet in {scope.label}; start one with `agac run WF`")
        return runs[0]
    run_row = store.get_run(ref, tenants=scope.visible)
    if run_row is not None:
        return run_row
    name = workflow_name(ref, proj)
    runs = store.list_runs(name, limit=1, tenants=scope.visible)
    if not runs:
        raise NotFound(f"no run of {ref!r} in {scope.label}; start one with `agac run {ref}`")
    return runs[0]
