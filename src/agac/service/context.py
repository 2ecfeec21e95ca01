"""What every part of the service shares: the project, one long-lived store, the clock,
and how the service is exposed (docs/guarantees.md, Teams)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agac.api.identity import Passwords
from agac.service.owner import Owner
from agac.service.throttle import LoginThrottle

if TYPE_CHECKING:
    from agac.config.project import Project
    from agac.store.repository import Store

__all__ = ["Exposure", "ServiceContext", "loopback_hosts"]

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def loopback_hosts(port: int) -> frozenset[str]:
    """The ``Host`` headers a browser sends to this service on this machine."""
    hosts = {f"{h}:{port}" for h in LOOPBACK}
    if port == 80:
        hosts.update(LOOPBACK)
    return frozenset(hosts)


@dataclass(frozen=True)
class Exposure:
    """How the service is reached.

    ``hosts``: the ``Host`` headers accepted (anything else is refused, which stops DNS
    rebinding: a page of another site whose name resolves to this machine sends its own
    name). ``secure``: cookies are ``Secure`` (served over TLS, or behind a TLS proxy).
    """

    hosts: frozenset[str]
    secure: bool = False

    @property
    def cookie(self) -> str:
        # The __Host- prefix makes the browser insist on Secure, Path=/ and no Domain.
        return "__Host-agac_session" if self.secure else "agac_session"

    @property
    def login_cookie(self) -> str:
        return "__Host-agac_login" if self.secure else "agac_login"


@dataclass
class ServiceContext:
    """The service's shared state; ``clock`` and ``sleep`` are injected so tests move time."""

    project: Project
    store: Store
    exposure: Exposure
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    passwords: Passwords = field(default_factory=Passwords)
    throttle: LoginThrottle = field(default_factory=LoginThrottle)
    poll_seconds: float = 0.5
    """How often live views look at the store for new events."""
    owner: Owner | None = None
    """One person on a local project (no ``identity: login``): sessions come only from
    the one-time link (:mod:`agac.service.owner`), never from users' passwords."""
