"""``agac serve`` for one person (``identity: local``, loopback only): a one-time link.

A project without ``identity: login`` has no users to sign in; its one person is who
``--as`` / ``AGAC_USER`` name on the command line. The service then prints a link holding
a random token once; opening it trades the token for a session (a cookie) and the token
is spent. Nothing is ever served without that session: a second browser, another local
user of the machine or a page of another site gets the sign-in refusal, never the pages.
The session lives in this process only (restart ``agac serve`` for a new link); the
person sees every tenant of the store, as their command line does.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agac.api.identity import Principal
from agac.tenants import DEFAULT_TENANT

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = ["ONCE_PATH", "Owner"]

ONCE_PATH = "/login"
"""Where the one-time link points; its token is the ``token`` query parameter."""


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Owner:
    """The one person of a local project and the sessions their link opened.

    ``token`` is shown once (in the link) and kept only as its hash here.
    """

    name: str
    tenant: str = DEFAULT_TENANT
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    _token_hash: str = field(default="", init=False, repr=False)
    _sessions: set[str] = field(default_factory=set, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._token_hash = _sha256(self.token)

    def link(self, base: str) -> str:
        return f"{base}{ONCE_PATH}?token={self.token}"

    def redeem(self, token: str) -> str | None:
        """A new session id for the right token, the first time only; else None."""
        with self._lock:
            if not self._token_hash or not hmac.compare_digest(_sha256(token), self._token_hash):
                return None
            self._token_hash = ""
            session_id = secrets.token_urlsafe(32)
            self._sessions.add(_sha256(session_id))
            return session_id

    def end(self, session_id: str) -> None:
        with self._lock:
            self._sessions.discard(_sha256(session_id))

    def principal(self, store: Store, session_id: str) -> Principal | None:
        """The owner, seeing every tenant of the store, for a session the link opened."""
        if not session_id or len(session_id) > 128:
            return None
        with self._lock:
            if _sha256(session_id) not in self._sessions:
                return None
        tenants = frozenset({DEFAULT_TENANT, self.tenant, *store.tenant_names()})
        return Principal(name=self.name, tenants=tenants, via="session")
