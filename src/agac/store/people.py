"""The people half of the repository API (a mixin of :class:`agac.store.repository.Store`):
users, their groups, API tokens and web sessions (T1).

The store keeps no secret in the clear: ``users.password_hash`` is an Argon2 hash,
``tokens.secret_hash`` and ``sessions.id_hash`` are SHA-256 hashes of random values only
their holder knows. Deciding what a hash means (expiry, who may do what) is the library's
business (:mod:`agac.api.identity`); these methods only read and write rows.

Ending a user's sessions happens in the same transaction as the change that requires it
(disable, a new password), so no request can slip in between with the old session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agac.jsontext import dumps
from agac.store import tables as t
from agac.store.core import StoreCore

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Row

__all__ = ["PeopleRepository"]


class PeopleRepository(StoreCore):
    # -- users ------------------------------------------------------------------------------

    def add_user(
        self,
        name: str,
        password_hash: str,
        tenants: Sequence[str],
        groups: Sequence[str],
        *,
        admin: bool,
        at: float,
    ) -> bool:
        """A new active user; False when the name is taken."""
        u = t.users
        with self._write("add the user") as conn:
            if conn.execute(sa.select(u.c.name).where(u.c.name == name)).first() is not None:
                return False
            conn.execute(
                u.insert().values(
                    name=name,
                    password_hash=password_hash,
                    tenants=dumps(sorted(set(tenants))),
                    admin=admin,
                    active=True,
                    created_at=at,
                    updated_at=at,
                )
            )
            self._set_groups(conn, name, groups)
            return True

    def get_user(self, name: str) -> Row | None:
        with self._read() as conn:
            return conn.execute(sa.select(t.users).where(t.users.c.name == name)).first()

    def list_users(self) -> list[Row]:
        with self._read() as conn:
            return list(conn.execute(sa.select(t.users).order_by(t.users.c.name)).all())

    def groups_of(self, names: Sequence[str]) -> dict[str, list[str]]:
        """user -> the groups the user is in (sorted), for the named users."""
        g = t.user_groups
        out: dict[str, list[str]] = {n: [] for n in names}
        if not names:
            return out
        with self._read() as conn:
            rows = conn.execute(
                sa.select(g.c.user_name, g.c.group_name)
                .where(g.c.user_name.in_(list(names)))
                .order_by(g.c.group_name)
            ).all()
        for r in rows:
            out[r.user_name].append(r.group_name)
        return out

    def members_of(self, groups: Sequence[str]) -> set[str]:
        """The users in any of ``groups``."""
        g = t.user_groups
        if not groups:
            return set()
        with self._read() as conn:
            return {
                r[0]
                for r in conn.execute(
                    sa.select(g.c.user_name).where(g.c.group_name.in_(list(groups)))
                ).all()
            }

    def change_user(
        self,
        name: str,
        *,
        at: float,
        end_sessions: bool = False,
        groups: Sequence[str] | None = None,
        tenants: Sequence[str] | None = None,
        **fields: Any,
    ) -> bool:
        """Change a user's row (``password_hash``, ``active``, ``admin``), and replace its
        ``groups`` or ``tenants`` when given; ``end_sessions`` ends every open session of the
        user in the same transaction. False when there is no such user."""
        u = t.users
        if tenants is not None:
            fields["tenants"] = dumps(sorted(set(tenants)))
        fields["updated_at"] = at
        with self._write("change the user") as conn:
            if conn.execute(u.update().where(u.c.name == name).values(**fields)).rowcount != 1:
                return False
            if groups is not None:
                conn.execute(t.user_groups.delete().where(t.user_groups.c.user_name == name))
                self._set_groups(conn, name, groups)
            if end_sessions:
                self._end_sessions(conn, name, at)
            return True

    @staticmethod
    def _set_groups(conn: Connection, name: str, groups: Sequence[str]) -> None:
        rows = [{"group_name": g, "user_name": name} for g in sorted(set(groups))]
        if rows:
            conn.execute(t.user_groups.insert(), rows)

    # -- API tokens --------------------------------------------------------------------------

    def add_token(
        self, token_id: str, user: str, secret_hash: str, *, at: float, expires_at: float
    ) -> None:
        with self._write("store the token") as conn:
            conn.execute(
                t.tokens.insert().values(
                    id=token_id,
                    user_name=user,
                    secret_hash=secret_hash,
                    created_at=at,
                    expires_at=expires_at,
                    revoked_at=None,
                    last_used_at=None,
                )
            )

    def token_and_user(self, token_id: str) -> Row | None:
        """The token (its columns) joined with its user's (``u_*``), by lookup id."""
        k, u = t.tokens, t.users
        q = (
            sa.select(
                k,
                u.c.tenants.label("u_tenants"),
                u.c.admin.label("u_admin"),
                u.c.active.label("u_active"),
            )
            .select_from(k.join(u, u.c.name == k.c.user_name))
            .where(k.c.id == token_id)
        )
        with self._read() as conn:
            return conn.execute(q).first()

    def list_tokens(self, user: str | None = None) -> list[Row]:
        q = sa.select(t.tokens).order_by(t.tokens.c.created_at, t.tokens.c.id)
        if user is not None:
            q = q.where(t.tokens.c.user_name == user)
        with self._read() as conn:
            return list(conn.execute(q).all())

    def find_tokens(self, ref: str) -> list[Row]:
        """Tokens whose id is ``ref`` or starts with it (at most two)."""
        with self._read() as conn:
            return list(
                conn.execute(
                    sa.select(t.tokens).where(t.tokens.c.id.startswith(ref)).limit(2)
                ).all()
            )

    def revoke_token(self, token_id: str, at: float) -> bool:
        k = t.tokens
        with self._write("revoke the token") as conn:
            return bool(
                conn.execute(
                    k.update()
                    .where(k.c.id == token_id, k.c.revoked_at.is_(None))
                    .values(revoked_at=at)
                ).rowcount
                == 1
            )

    def touch_token(self, token_id: str, at: float) -> None:
        with self._write("note the token's use") as conn:
            conn.execute(t.tokens.update().where(t.tokens.c.id == token_id).values(last_used_at=at))

    # -- web sessions ---------------------------------------------------------------------------

    def add_session(self, id_hash: str, user: str, at: float) -> None:
        with self._write("start the session") as conn:
            conn.execute(
                t.sessions.insert().values(
                    id_hash=id_hash, user_name=user, created_at=at, last_seen_at=at, ended_at=None
                )
            )

    def session_and_user(self, id_hash: str) -> Row | None:
        """The session (its columns) joined with its user's (``u_*``)."""
        s, u = t.sessions, t.users
        q = (
            sa.select(
                s,
                u.c.tenants.label("u_tenants"),
                u.c.admin.label("u_admin"),
                u.c.active.label("u_active"),
            )
            .select_from(s.join(u, u.c.name == s.c.user_name))
            .where(s.c.id_hash == id_hash)
        )
        with self._read() as conn:
            return conn.execute(q).first()

    def touch_session(self, id_hash: str, at: float) -> None:
        with self._write("note the session's use") as conn:
            conn.execute(
                t.sessions.update()
                .where(t.sessions.c.id_hash == id_hash, t.sessions.c.ended_at.is_(None))
                .values(last_seen_at=at)
            )

    def end_session(self, id_hash: str, at: float) -> None:
        with self._write("end the session") as conn:
            conn.execute(
                t.sessions.update()
                .where(t.sessions.c.id_hash == id_hash, t.sessions.c.ended_at.is_(None))
                .values(ended_at=at)
            )

    @staticmethod
    def _end_sessions(conn: Connection, user: str, at: float) -> None:
        s = t.sessions
        conn.execute(
            s.update().where(s.c.user_name == user, s.c.ended_at.is_(None)).values(ended_at=at)
        )
