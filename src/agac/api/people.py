"""Administrator calls (T0): ``agac users …`` and ``agac tokens …``.

Whoever holds the store's credentials (or the SQLite file) and ``AGAC_SECRET``
administers the project: these calls write the store directly, with no sign-in. Everyone
else reaches agac only through ``agac serve``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from agac.api import identity
from agac.api.projects import ProjectRef, project_of, using
from agac.config.project import store_url
from agac.errors import UsageError

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = [
    "tokens_create",
    "tokens_list",
    "tokens_revoke",
    "users_add",
    "users_disable",
    "users_enable",
    "users_list",
    "users_passwd",
    "users_set",
]


@contextmanager
def _store(project: ProjectRef, store: Store | None = None) -> Iterator[Store]:
    proj = project_of(project)
    if store is None and store_url(proj) == "memory":
        raise UsageError(
            "users and tokens live in the store, and this project's store is memory "
            "(it keeps nothing); use the default SQLite store or PostgreSQL"
        )
    with using(proj, store) as (_proj, opened):
        yield opened


def users_add(
    name: str,
    password: str,
    *,
    tenants: Sequence[str],
    groups: Sequence[str] = (),
    admin: bool = False,
    project: ProjectRef = None,
) -> dict[str, Any]:
    """``agac users add NAME --tenant T … [--group G …] [--admin] --password-stdin``."""
    with _store(project) as store:
        return identity.add_user(store, name, password, tenants=tenants, groups=groups, admin=admin)


def users_list(project: ProjectRef = None) -> list[dict[str, Any]]:
    with _store(project) as store:
        return identity.list_users(store)


def users_disable(name: str, project: ProjectRef = None) -> dict[str, Any]:
    """Disable a user: its sessions end and its tokens stop working at once."""
    with _store(project) as store:
        return identity.change_user(store, name, active=False)


def users_enable(name: str, project: ProjectRef = None) -> dict[str, Any]:
    with _store(project) as store:
        return identity.change_user(store, name, active=True)


def users_set(
    name: str,
    *,
    tenants: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
    admin: bool | None = None,
    project: ProjectRef = None,
) -> dict[str, Any]:
    """Replace a user's tenants, groups or administrator flag (those given)."""
    if tenants is None and groups is None and admin is None:
        raise UsageError(
            "say what to change: --tenant T, --group G, --no-groups, --admin or --no-admin"
        )
    with _store(project) as store:
        return identity.change_user(store, name, tenants=tenants, groups=groups, admin=admin)


def users_passwd(name: str, password: str, project: ProjectRef = None) -> dict[str, Any]:
    """A new password; the user's sessions end."""
    with _store(project) as store:
        return identity.set_password(store, name, password)


def tokens_create(
    user: str, *, expires_in: float = identity.DEFAULT_TOKEN_LIFETIME, project: ProjectRef = None
) -> dict[str, Any]:
    """A new API token for ``user``; the token itself is in the result once, never stored."""
    with _store(project) as store:
        return identity.create_token(store, user, expires_in=expires_in)


def tokens_list(user: str | None = None, project: ProjectRef = None) -> list[dict[str, Any]]:
    with _store(project) as store:
        return identity.list_tokens(store, user)


def tokens_revoke(ref: str, project: ProjectRef = None) -> dict[str, Any]:
    with _store(project) as store:
        return identity.revoke_token(store, ref)
