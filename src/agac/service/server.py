"""``agac serve``: check how the service is to be exposed, then run it with uvicorn.

Refused (exit 2, naming the fix) when:

- the project has no ``identity: login`` and the service would be reachable from other
  machines (``--allow-remote``): without it the service is for one person on this machine,
  who opens it through a one-time link printed at start (:mod:`agac.service.owner`);
- the store is not an SQL store (``memory`` keeps nothing; the service reads what runs in
  other processes write);
- ``--host`` is not loopback without ``--allow-remote``, or with it but with neither TLS
  (``--tls-cert`` and ``--tls-key``) nor ``--behind-proxy`` (the proxy's addresses), or
  without ``--public-host`` (the name browsers use, checked against ``Host``).
"""

from __future__ import annotations

import getpass
import ipaddress
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agac.errors import UsageError
from agac.ports import check_port
from agac.service.context import Exposure, loopback_hosts
from agac.service.owner import Owner

if TYPE_CHECKING:
    from agac.config.project import Project

__all__ = ["ServeOptions", "exposure_for", "owner_for", "serve"]


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8800
    allow_remote: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None
    behind_proxy: tuple[str, ...] = ()
    public_hosts: tuple[str, ...] = ()
    owner: str | None = None
    """Who the one person is without ``identity: login`` (``--as``; else ``AGAC_USER``,
    else the login name of this machine's user)."""


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

    # a port in use is an error (exit 2) before any link is announced or token made
    check_port(options.host, options.port)
    owner = None if project.config.login else owner_for(project, options)
    url = store_url(project)
    if url == "memory" or not url.startswith(("sqlite", "postgres")):
        raise UsageError(
            f"agac serve needs an SQL store (SQLite or PostgreSQL), not {url!r}: it "
            "reads what runs in other processes write"
        )
    exposure = exposure_for(options)
    store = Store(url)
    try:
        app = create_app(
            ServiceContext(project=project, store=store, exposure=exposure, owner=owner)
        )
        scheme = "https" if options.tls_cert else "http"
        base = f"{scheme}://{_url_host(options.host)}:{options.port}"
        if owner is not None:
            announce(
                f"agac serve: for {owner.name} only (identity: local); open this link "
                f"once (it signs this browser in; Ctrl-C stops):\n  {owner.link(base)}"
            )
        else:
            users = sum(1 for u in store.list_users() if u.active)
            announce(
                f"agac serve: {base}/ "
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


def owner_for(project: Project, options: ServeOptions) -> Owner:
    """The one person of a project without ``identity: login``; refused unless the
    service stays on this machine (loopback)."""
    from agac.config.project import project_tenant

    if options.allow_remote or not _loopback(options.host):
        raise UsageError(
            "agac serve for other machines needs `identity: login` in agac.yml (people "
            "then sign in with a password: `agac users add NAME --tenant T "
            "--password-stdin`); without it the service is for one person on loopback "
            "(drop --host/--allow-remote)"
        )
    name = (options.owner or os.environ.get("AGAC_USER") or _login_name()).strip()
    if not name:
        raise UsageError("say who you are: agac serve --as NAME (or set AGAC_USER)")
    return Owner(name=name, tenant=project_tenant(project))


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def parse_hosts(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(v for value in values for v in value.replace(",", " ").split() if v)
