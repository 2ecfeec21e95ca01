"""``agac serve``: check how the service is to be exposed, then run it with uvicorn.

Refused (exit 2, naming the fix) when:

- the project has no ``identity: login`` (the service is where people prove who they are);
- the store is not an SQL store (``memory`` keeps nothing; the service reads what runs in
  other processes write);
- ``--host`` is not loopback without ``--allow-remote``, or with it but with neither TLS
  (``--tls-cert`` and ``--tls-key``) nor ``--behind-proxy`` (the proxy's addresses), or
  without ``--public-host`` (the name browsers use, checked against ``Host``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agac.errors import UsageError
from agac.service.context import Exposure, loopback_hosts

if TYPE_CHECKING:
    from agac.config.project import Project

__all__ = ["ServeOptions", "exposure_for", "serve"]


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8800
    allow_remote: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None
    behind_proxy: tuple[str, ...] = ()
    public_hosts: tuple[str, ...] = ()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_for(options: ServeOptions) -> Exposure:
    """The accepted Host names and cookie security, or UsageError naming what is missing."""
    if bool(options.tls_cert) != bool(options.tls_key):
        raise UsageError("TLS needs both --tls-cert FILE and --tls-key FILE")
    remote = not _loopback(options.host)
    if remote and not options.allow_remote:
        raise UsageError(
            f"--host {options.host} would let other machines reach the service; "
            "say so with --allow-remote, and serve over TLS (--tls-cert, --tls-key) "
            "or behind a TLS proxy (--behind-proxy ADDR)"
        )
    if options.allow_remote:
        if not options.tls_cert and not options.behind_proxy:
            raise UsageError(
                "--allow-remote needs TLS: --tls-cert FILE --tls-key FILE, or "
                "--behind-proxy ADDR (the address of the TLS proxy in front)"
            )
        if not options.public_hosts:
            raise UsageError(
                "--allow-remote needs --public-host NAME: the host name people "
                "type (requests naming another host are refused, against DNS "
                "rebinding)"
            )
    hosts = set(loopback_hosts(options.port))
    for name in options.public_hosts:
        name = name.lower().strip()
        hosts.add(name)
        if ":" not in name.rsplit("]", 1)[-1]:
            hosts.add(f"{name}:{options.port}")
    return Exposure(hosts=frozenset(hosts), secure=options.allow_remote)


def serve(
    project: Project, options: ServeOptions, *, announce: Callable[[str], Any] = print
) -> None:
    """Run the service until interrupted."""
    import uvicorn

    from agac.config.project import store_url
    from agac.service.app import create_app
    from agac.service.context import ServiceContext
    from agac.store.repository import Store

    if not project.config.login:
        raise UsageError(
            "agac serve needs `identity: login` in agac.yml: the service is where "
            "people sign in, and decisions then come only from signed-in users "
            "(add users with `agac users add NAME --tenant T --password-stdin`)"
        )
    url = store_url(project)
    if url == "memory" or not url.startswith(("sqlite", "postgres")):
        raise UsageError(
            f"agac serve needs an SQL store (SQLite or PostgreSQL), not {url!r}: it "
            "reads what runs in other processes write"
        )
    exposure = exposure_for(options)
    store = Store(url)
    try:
        app = create_app(ServiceContext(project=project, store=store, exposure=exposure))
        scheme = "https" if options.tls_cert else "http"
        users = sum(1 for u in store.list_users() if u.active)
        announce(
            f"agac serve: {scheme}://{options.host}:{options.port}/ "
            f"({users} active user{'s' if users != 1 else ''}; Ctrl-C stops)"
        )
        kwargs: dict[str, Any] = {}
        if options.behind_proxy:
            kwargs.update(proxy_headers=True, forwarded_allow_ips=list(options.behind_proxy))
        else:
            kwargs.update(proxy_headers=False)
        uvicorn.run(
            app,
            host=options.host,
            port=options.port,
            log_level="warning",
            access_log=False,
            ssl_certfile=options.tls_cert,
            ssl_keyfile=options.tls_key,
            lifespan="off",
            **kwargs,
        )
    finally:
        store.close()


def parse_hosts(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(v for value in values for v in value.replace(",", " ").split() if v)
