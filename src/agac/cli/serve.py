"""``agac serve``: the web pages and JSON API for a team (docs/guarantees.md, Teams)."""

from __future__ import annotations

import click

from agac.cli.main import command

__all__ = ["serve"]


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback needs --allow-remote.",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8800, show_default=True)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Let other machines connect (needs TLS or --behind-proxy, and --public-host).",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="TLS certificate (PEM) to serve HTTPS with.",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="TLS private key (PEM).",
)
@click.option(
    "--behind-proxy",
    "behind_proxy",
    multiple=True,
    metavar="ADDR",
    help="Address of a TLS proxy in front (its X-Forwarded-* are trusted). Repeatable.",
)
@click.option(
    "--public-host",
    "public_hosts",
    multiple=True,
    metavar="NAME",
    help="Host name people use to reach the service (checked on every request). Repeatable.",
)
@click.option(
    "--as",
    "who",
    default=None,
    metavar="NAME",
    help="Without identity: login, who you are (else AGAC_USER, else your login name).",
)
@command
def serve(
    host: str,
    port: int,
    allow_remote: bool,
    tls_cert: str | None,
    tls_key: str | None,
    behind_proxy: tuple[str, ...],
    public_hosts: tuple[str, ...],
    who: str | None,
) -> int:
    """Serve runs, approvals and cost: to signed-in users (identity: login), or to you
    alone on this machine through a one-time link."""
    from agac.config.project import find_project
    from agac.service.server import ServeOptions, parse_hosts
    from agac.service.server import serve as _serve

    _serve(
        find_project(),
        ServeOptions(
            host=host,
            port=port,
            allow_remote=allow_remote,
            tls_cert=tls_cert,
            tls_key=tls_key,
            behind_proxy=parse_hosts(behind_proxy),
            public_hosts=parse_hosts(public_hosts),
            owner=who,
        ),
        announce=lambda line: click.echo(line, err=True),
    )
    return 0
