"""Who is asking (T0, T1): users, API tokens, web sessions, and the
:class:`Principal` every team-facing library call takes.

- **Passwords** are Argon2id hashes (argon2-cffi, the ``service`` extra). Signing in with
  a name nobody has still verifies a dummy hash, so an unknown name costs what a wrong
  password costs: the answer's timing says nothing about which names exist.
- **Tokens** are ``agac_<id>_<secret>``: ``id`` is a random lookup prefix stored as is,
  the whole token is stored as its SHA-256 (a fast hash is right here: the token is 256
  random bits, not a guessable password, and it is checked on every API request). A token
  has an expiry and can be revoked; it works only while its user is active.
- **Sessions** are random ids held in a cookie and stored as their SHA-256. A session ends
  after 8 hours without a request (idle) and 7 days after it started (absolute), and at
  logout, when its user is disabled and when its user's password changes.
- **Every request re-reads the user**: a principal is built from the user's row as it is
  now (active flag, tenants, groups), never from what it was at sign-in.

Times come from an injected clock (``clock=time.time`` by default), so tests move time
instead of sleeping.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agac.errors import NotFound, UsageError
from agac.installing import install_hint
from agac.jsontext import loads
from agac.tenants import is_tenant

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = [
    "DEFAULT_TOKEN_LIFETIME",
    "SESSION_ABSOLUTE",
    "SESSION_IDLE",
    "Clock",
    "Passwords",
    "Principal",
    "add_user",
    "change_user",
    "create_token",
    "csrf_token",
    "list_tokens",
    "list_users",
    "revoke_token",
    "session_principal",
    "set_password",
    "sign_in",
    "sign_out",
    "token_principal",
]

Clock = Callable[[], float]

SESSION_IDLE = 8 * 3600.0
"""A session ends after this long without a request."""
SESSION_ABSOLUTE = 7 * 86400.0
"""A session ends this long after it started, however busy."""
TOUCH_EVERY = 60.0
"""A session's or token's last use is written at most this often (not on every request)."""
MIN_PASSWORD = 10
DEFAULT_TOKEN_LIFETIME = 90 * 86400.0

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,99}")
_TOKEN = re.compile(r"agac_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")


@dataclass(frozen=True)
class Principal:
    """The caller of a team-facing call, as the store says it is now.

    ``tenants`` are the tenants whose objects the caller sees and acts on (T2); ``groups``
    the approver groups it is in (under ``identity: login`` they live in the store only).
    """

    name: str
    tenants: frozenset[str]
    groups: frozenset[str] = frozenset()
    admin: bool = False
    via: str = "session"
    """How the caller proved who it is: ``session`` (the web pages) or ``token`` (the API)."""

    def sees(self, tenant: str) -> bool:
        return tenant in self.tenants


class Passwords:
    """Argon2id hashing with a dummy hash for names nobody has.

    ``hasher`` is an ``argon2.PasswordHasher``; the default has argon2-cffi's RFC 9106
    parameters. Tests may pass a cheaper one.
    """

    def __init__(self, hasher: Any = None) -> None:
        if hasher is None:
            try:
                from argon2 import PasswordHasher
            except ImportError as exc:
                raise UsageError(f"passwords need argon2-cffi: {install_hint('service')}") from exc
            hasher = PasswordHasher()
        self.hasher = hasher
        self._dummy = hasher.hash(secrets.token_urlsafe(16))

    def hash(self, password: str) -> str:
        return str(self.hasher.hash(password))

    def verify(self, stored: str | None, password: str) -> bool:
        """Whether ``password`` matches ``stored``; with no stored hash (an unknown name)
        the dummy is verified instead, so both take the same time, and the answer is False."""
        from argon2.exceptions import InvalidHashError, VerificationError

        try:
            ok = bool(self.hasher.verify(stored or self._dummy, password))
        except (VerificationError, InvalidHashError):
            return False
        return ok and stored is not None


_DEFAULT_PASSWORDS: Passwords | None = None


def _passwords(passwords: Passwords | None) -> Passwords:
    global _DEFAULT_PASSWORDS
    if passwords is not None:
        return passwords
    if _DEFAULT_PASSWORDS is None:
        _DEFAULT_PASSWORDS = Passwords()
    return _DEFAULT_PASSWORDS


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- checks of what an administrator types -----------------------------------------------------


def _check_name(name: str, what: str = "user name") -> str:
    if not _NAME.fullmatch(name or ""):
        raise UsageError(
            f"{what} {name!r} is not valid: letters, digits and . _ @ -, starting "
            "with a letter or digit, at most 100 characters"
        )
    return name


def _check_tenants(tenants: Sequence[str]) -> list[str]:
    if not tenants:
        raise UsageError(
            "a user needs at least one tenant: --tenant T (the tenant of runs "
            "started without one is `default`)"
        )
    for tenant in tenants:
        if not is_tenant(tenant):
            raise UsageError(
                f"tenant {tenant!r} is not valid: letters, digits and . _ -, starting "
                "with a letter or digit, at most 64 characters"
            )
    return sorted(set(tenants))


def _check_password(password: str) -> str:
    password = password.rstrip("\r\n")
    if len(password) < MIN_PASSWORD:
        raise UsageError(f"the password must have at least {MIN_PASSWORD} characters")
    return password


# -- users (administrator calls: they write the store directly, T0) ------------------------


def add_user(
    store: Store,
    name: str,
    password: str,
    *,
    tenants: Sequence[str],
    groups: Sequence[str] = (),
    admin: bool = False,
    clock: Clock = time.time,
    passwords: Passwords | None = None,
) -> dict[str, Any]:
    """A new active user in ``tenants`` and ``groups``; refused when the name is taken."""
    _check_name(name)
    tenant_list = _check_tenants(tenants)
    for group in groups:
        _check_name(group, "group name")
    stored = _passwords(passwords).hash(_check_password(password))
    if not store.add_user(name, stored, tenant_list, list(groups), admin=admin, at=clock()):
        raise UsageError(
            f"there is already a user {name!r}; change it with `agac users set "
            f"{name}` or `agac users passwd {name}`"
        )
    return _user_dict(store, name)


def list_users(store: Store) -> list[dict[str, Any]]:
    rows = store.list_users()
    groups = store.groups_of([r.name for r in rows])
    return [_row_dict(r, groups[r.name]) for r in rows]


def change_user(
    store: Store,
    name: str,
    *,
    active: bool | None = None,
    tenants: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
    admin: bool | None = None,
    clock: Clock = time.time,
) -> dict[str, Any]:
    """Disable or enable a user (disabling ends its sessions at once; its tokens stop working
    while it is disabled), or replace its tenants or groups, or its administrator flag."""
    fields: dict[str, Any] = {}
    if active is not None:
        fields["active"] = active
    if admin is not None:
        fields["admin"] = admin
    tenant_list = _check_tenants(tenants) if tenants is not None else None
    for group in groups or ():
        _check_name(group, "group name")
    if not store.change_user(
        name, at=clock(), end_sessions=active is False, groups=groups, tenants=tenant_list, **fields
    ):
        raise NotFound(f"no user {name!r}; `agac users list` shows them")
    return _user_dict(store, name)


def set_password(
    store: Store,
    name: str,
    password: str,
    *,
    clock: Clock = time.time,
    passwords: Passwords | None = None,
) -> dict[str, Any]:
    """A new password; every session of the user ends."""
    stored = _passwords(passwords).hash(_check_password(password))
    if not store.change_user(name, at=clock(), end_sessions=True, password_hash=stored):
        raise NotFound(f"no user {name!r}; `agac users list` shows them")
    return _user_dict(store, name)


def _user_dict(store: Store, name: str) -> dict[str, Any]:
    row = store.get_user(name)
    assert row is not None
    return _row_dict(row, store.groups_of([name])[name])


def _row_dict(row: Any, groups: list[str]) -> dict[str, Any]:
    return {
        "name": row.name,
        "tenants": loads(row.tenants),
        "groups": groups,
        "admin": bool(row.admin),
        "active": bool(row.active),
        "created_at": row.created_at,
    }


# -- API tokens ---------------------------------------------------------------------------------


def create_token(
    store: Store, user: str, *, expires_in: float = DEFAULT_TOKEN_LIFETIME, clock: Clock = time.time
) -> dict[str, Any]:
    """A new API token for ``user``; ``token`` in the result is shown once and never stored."""
    if store.get_user(user) is None:
        raise NotFound(
            f"no user {user!r}; add one with `agac users add {user} --tenant T --password-stdin`"
        )
    if expires_in <= 0:
        raise UsageError("--expires must be a positive duration (90d, 12h)")
    token_id = secrets.token_hex(6)
    token = f"agac_{token_id}_{secrets.token_urlsafe(32)}"
    now = clock()
    store.add_token(token_id, user, _sha256(token), at=now, expires_at=now + expires_in)
    return {
        "id": token_id,
        "user": user,
        "token": token,
        "created_at": now,
        "expires_at": now + expires_in,
    }


def list_tokens(
    store: Store, user: str | None = None, *, clock: Clock = time.time
) -> list[dict[str, Any]]:
    now = clock()
    out = []
    for r in store.list_tokens(user):
        state = (
            "revoked" if r.revoked_at is not None else "expired" if now >= r.expires_at else "valid"
        )
        out.append(
            {
                "id": r.id,
                "user": r.user_name,
                "state": state,
                "created_at": r.created_at,
                "expires_at": r.expires_at,
                "revoked_at": r.revoked_at,
                "last_used_at": r.last_used_at,
            }
        )
    return out


def revoke_token(store: Store, ref: str, *, clock: Clock = time.time) -> dict[str, Any]:
    rows = store.find_tokens(ref) if ref else []
    if not rows or (len(rows) > 1 and rows[0].id != ref):
        raise NotFound(f"no single token {ref!r}; `agac tokens list` shows them")
    store.revoke_token(rows[0].id, clock())
    return next(
        t for t in list_tokens(store, rows[0].user_name, clock=clock) if t["id"] == rows[0].id
    )


def token_principal(store: Store, token: str, *, clock: Clock = time.time) -> Principal | None:
    """The principal behind an API token, or None (malformed, unknown, altered, revoked,
    expired, or its user disabled)."""
    m = _TOKEN.fullmatch(token or "")
    if m is None:
        return None
    row = store.token_and_user(m.group(1))
    if row is None or not hmac.compare_digest(row.secret_hash, _sha256(token)):
        return None
    now = clock()
    if row.revoked_at is not None or now >= row.expires_at or not row.u_active:
        return None
    if row.last_used_at is None or now - row.last_used_at >= TOUCH_EVERY:
        store.touch_token(row.id, now)
    return _principal(store, row.user_name, row.u_tenants, row.u_admin, "token")


# -- web sessions --------------------------------------------------------------------------------


def sign_in(
    store: Store,
    name: str,
    password: str,
    *,
    clock: Clock = time.time,
    passwords: Passwords | None = None,
) -> tuple[str, Principal] | None:
    """(a new session id, the principal) when ``name`` is an active user with this
    password, else None. An unknown name verifies a dummy hash: same cost, same answer."""
    row = store.get_user(name) if _NAME.fullmatch(name or "") else None
    ok = _passwords(passwords).verify(row.password_hash if row is not None else None, password)
    if not ok or row is None or not row.active:
        return None
    session_id = secrets.token_urlsafe(32)
    store.add_session(_sha256(session_id), row.name, clock())
    return session_id, _principal(store, row.name, row.tenants, row.admin, "session")


def session_principal(
    store: Store, session_id: str, *, clock: Clock = time.time
) -> Principal | None:
    """The principal of a live session, re-read from the store; None when the session is
    unknown, ended, idle 8 h, older than 7 d, or its user is disabled."""
    if not session_id or len(session_id) > 128:
        return None
    id_hash = _sha256(session_id)
    row = store.session_and_user(id_hash)
    if row is None or row.ended_at is not None or not row.u_active:
        return None
    now = clock()
    if now - row.last_seen_at >= SESSION_IDLE or now - row.created_at >= SESSION_ABSOLUTE:
        store.end_session(id_hash, now)
        return None
    if now - row.last_seen_at >= TOUCH_EVERY:
        store.touch_session(id_hash, now)
    return _principal(store, row.user_name, row.u_tenants, row.u_admin, "session")


def sign_out(store: Store, session_id: str, *, clock: Clock = time.time) -> None:
    if session_id:
        store.end_session(_sha256(session_id), clock())


def csrf_token(session_id: str) -> str:
    """The CSRF token of a session's forms: derived from the session id (which only the
    session's browser holds), so nothing more is stored."""
    return hmac.new(session_id.encode("utf-8"), b"agac-csrf", hashlib.sha256).hexdigest()


def _principal(store: Store, name: str, tenants_json: str, admin: Any, via: str) -> Principal:
    groups = store.groups_of([name])[name]
    return Principal(
        name=name,
        tenants=frozenset(loads(tenants_json)),
        groups=frozenset(groups),
        admin=bool(admin),
        via=via,
    )
