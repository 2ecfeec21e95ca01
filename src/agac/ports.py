"""Whether this process can listen on an address, asked before a server announces it."""

from __future__ import annotations

import socket

from agac.errors import UsageError

__all__ = ["check_port"]


def check_port(host: str, port: int) -> None:
    """UsageError naming the port when ``host:port`` cannot be listened on (another server
    has it, or the address is not this machine's), so a server (the emulator, the service) never
    announces a URL it cannot serve."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(
            f"cannot serve on {host}: {exc.strerror or exc}",
            hint="give --host an address of this machine, e.g. 127.0.0.1",
        ) from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise UsageError(
                f"cannot serve on {host}:{port}: {exc.strerror or exc}",
                hint="another process listens there: stop it, or choose another port with --port",
            ) from exc
