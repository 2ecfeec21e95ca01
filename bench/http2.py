"""Issue 16: would HTTP/2 lower the lean transport's client CPU per call, or raise throughput?

Usage:
  python bench/http2.py [--calls 3000] [--concurrency 64] [--latency-ms 50] [--repeats 3]
                        [--tls] [--max-streams 100] [--cases all|name,name,...]

The lean transport (src/agac/providers/_http.py) speaks HTTP/1.1 through aiohttp, whose
client has no HTTP/2. The candidates that do are httpx (``http2=True``, with ``h2``) and
httpx2 (the client of the openai SDK 3.x, same option). Each case is one client speaking
one protocol to one server:

- ``aiohttp-h1``: agac's own :class:`HttpSession` (the lean transport as it ships);
- ``httpx-h1`` / ``httpx-h2``: ``httpx.AsyncClient(http1=..., http2=...)``;
- ``httpx2-h1`` / ``httpx2-h2``: ``httpx2.AsyncClient`` likewise;

against two servers, started once as their own processes and answering a fixed OpenAI chat
completion after ``asyncio.sleep(latency)``:

- ``hypercorn``: a tiny ASGI app under hypercorn, which serves HTTP/1.1 and HTTP/2 on the
  same port (HTTP/2 with prior knowledge in clear, or negotiated by ALPN with ``--tls``,
  using a throwaway self-signed certificate made at start), so both protocols meet the
  same server stack;
- ``wire``: bench/wire_server.py (aiohttp, HTTP/1.1 only, in clear), the server of
  bench/online_wire.py.

Every httpx/httpx2 call does what the lean transport does around the wire: the body
serialised with agac's JSON encoder, the answer parsed with ``json.loads``. Clients get a
pool of ``--concurrency`` connections and no proxy lookup from the environment.

Each case runs in its own child process, which keeps ``--concurrency`` calls in flight,
makes 200 warm-up calls, then measures ``time.process_time()`` and wall time over
``--calls`` calls. Reported per case: client CPU per call (ms), calls/s, the connections
the server saw the client open (distinct client addresses), and the server's CPU per call.
Cases run interleaved (``--repeats`` rounds, order rotated each round); the table at the
end gives medians. Prints one JSON line per measurement.

  python bench/http2.py h2-floor [--calls 3000] [--concurrency 64] [--repeats 3]

measures, without sockets, what the ``h2`` package alone costs a client per call
(framing, HPACK, flow control; ``--calls`` x 10 calls): a floor under any HTTP/2 client
built on it, to set beside aiohttp's whole HTTP/1.1 call.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

# Run as a script, bench/ is on sys.path: the review text, the machine's description and
# the fixed chat completion are the ones bench/online_wire.py and bench/wire_server.py use.
from online_wire import machine, review  # type: ignore[import-not-found]
from wire_server import ANSWERS, TEXT  # type: ignore[import-not-found]

HERE = Path(__file__).parent
ANSWER = json.dumps(ANSWERS["openai"]).encode()
PATH = "/v1/chat/completions"
#: (client, protocol, server) of every case; ``wire`` speaks HTTP/1.1 only.
CASES = {
    "aiohttp-h1@wire": ("aiohttp", "h1", "wire"),
    "httpx-h1@wire": ("httpx", "h1", "wire"),
    "httpx2-h1@wire": ("httpx2", "h1", "wire"),
    "aiohttp-h1@hypercorn": ("aiohttp", "h1", "hypercorn"),
    "httpx-h1@hypercorn": ("httpx", "h1", "hypercorn"),
    "httpx-h2@hypercorn": ("httpx", "h2", "hypercorn"),
    "httpx2-h1@hypercorn": ("httpx2", "h1", "hypercorn"),
    "httpx2-h2@hypercorn": ("httpx2", "h2", "hypercorn"),
}
PORTS = {"hypercorn": 18791, "wire": 18792}


def request_body(i: int) -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "max_completion_tokens": 256,
        "messages": [
            {"role": "system", "content": "You label product reviews."},
            {"role": "user", "content": f"Classify this review: {review(i)}"},
        ],
    }


# -- the hypercorn server -----------------------------------------------------------------


def serve_hypercorn(port: int, latency: float, max_streams: int, tls: Path | None) -> None:
    """Runs in its own process: HTTP/1.1 and HTTP/2 on one port, hypercorn + ASGI."""
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    state: dict[str, Any] = {"answered": 0, "peers": set()}
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(ANSWER)).encode()),
    ]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        more = True
        while more:  # read the whole request body, as a real server does
            message = await receive()
            more = message.get("more_body", False)
        if scope["method"] == "POST" and scope["path"] == PATH:
            state["peers"].add(tuple(scope["client"]))
            await asyncio.sleep(latency)
            state["answered"] += 1
            body, status, head = ANSWER, 200, headers
        else:
            if scope["query_string"] == b"reset":
                state["peers"].clear()
            body = json.dumps(counts(state)).encode()
            status, head = 200, [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": body})

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.backlog = 1024
    config.h2_max_concurrent_streams = max_streams
    config.keep_alive_timeout = 60
    config.keep_alive_max_requests = 10**9  # never close a busy connection
    if tls is not None:
        config.certfile, config.keyfile = str(tls / "cert.pem"), str(tls / "key.pem")
    asyncio.run(serve(app, config))  # type: ignore[arg-type]


def counts(state: dict[str, Any]) -> dict[str, Any]:
    times = os.times()
    return {
        "answered": state["answered"],
        "connections": len(state["peers"]),
        "cpu_s": times.user + times.system,
    }


# -- the wire server (bench/wire_server.py), with a connection count ----------------------


def serve_wire(port: int, latency: float) -> None:
    """Runs in its own process: bench/wire_server.py's app, plus ``/stats``."""
    from aiohttp import web
    from wire_server import make_app

    state: dict[str, Any] = {"answered": 0, "peers": set()}

    @web.middleware
    async def track(request: web.Request, handler: Any) -> Any:
        if request.path == PATH and request.transport is not None:
            state["peers"].add(request.transport.get_extra_info("peername"))
            state["answered"] += 1
        return await handler(request)

    async def stats(request: web.Request) -> web.Response:
        if "reset" in request.query:
            state["peers"].clear()
        return web.json_response(counts(state))

    app = make_app(latency)
    app.middlewares.append(track)
    app.router.add_get("/stats", stats)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=1024)


# -- servers, certificates ----------------------------------------------------------------


def make_cert(folder: Path) -> None:
    """A throwaway self-signed certificate for 127.0.0.1 (cert.pem, key.pem)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def start_server(kind: str, args: argparse.Namespace, tls: Path | None) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        __file__,
        f"serve-{kind}",
        "--port",
        str(PORTS[kind]),
        "--latency-ms",
        str(args.latency_ms),
        "--max-streams",
        str(args.max_streams),
    ]
    if tls is not None and kind == "hypercorn":
        cmd += ["--cert-dir", str(tls)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            stats(kind, tls)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the {kind} server did not start")


def base_url(server: str, tls: Path | None) -> str:
    scheme = "https" if tls is not None and server == "hypercorn" else "http"
    return f"{scheme}://127.0.0.1:{PORTS[server]}"


def stats(server: str, tls: Path | None, query: str = "") -> dict[str, Any]:
    context = None
    if tls is not None and server == "hypercorn":
        context = ssl.create_default_context(cafile=str(tls / "cert.pem"))
    with urllib.request.urlopen(
        f"{base_url(server, tls)}/stats{query}", timeout=10, context=context
    ) as response:
        found: dict[str, Any] = json.loads(response.read())
        return found


# -- one client -----------------------------------------------------------------------------


class Client:
    """``post(body) -> parsed JSON`` over one client library and protocol."""

    def __init__(
        self, client: str, protocol: str, url: str, connections: int, cafile: str | None
    ) -> None:
        self.url = url
        self.kind = client
        headers = {
            "Authorization": "Bearer x",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        if client == "aiohttp":
            from agac.providers._http import HttpSession

            self.session = HttpSession("openai", headers, connections=connections, timeout=60.0)
            return
        lib: Any = __import__(client)  # httpx or httpx2: the same public API
        verify: Any = ssl.create_default_context(cafile=cafile) if cafile else True
        limits = lib.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.client = lib.AsyncClient(
            http1=protocol == "h1",
            http2=protocol == "h2",
            headers=headers,
            limits=limits,
            timeout=60.0,
            verify=verify,
            trust_env=False,
        )
        self.dumps: Any = __import__("agac.jsontext", fromlist=["dumps"]).dumps

    async def post(self, body: Any) -> Any:
        if self.kind == "aiohttp":
            return await self.session.post(self.url, body, errors=self._error)
        response = await self.client.post(self.url, content=self.dumps(body).encode())
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
        return json.loads(response.content)

    @staticmethod
    def _error(status: int, headers: Any, body: Any, text: str) -> Any:
        from agac.errors import ProviderError

        return ProviderError(f"HTTP {status}: {text[:200]}")

    async def protocol_seen(self) -> str:
        """The HTTP version of one more call (to check the case speaks what it says)."""
        if self.kind == "aiohttp":
            return "HTTP/1.1"  # aiohttp's client speaks nothing else
        response = await self.client.post(self.url, content=self.dumps(request_body(0)).encode())
        return str(response.http_version)

    async def aclose(self) -> None:
        if self.kind == "aiohttp":
            await self.session.aclose()
        else:
            await self.client.aclose()


def client_case(case: str, args: argparse.Namespace) -> dict[str, Any]:
    """Runs in its own process: CPU per call of one client over ``args.calls`` calls."""
    client_name, protocol, server = CASES[case]
    tls = Path(args.cert_dir) if args.cert_dir else None
    cafile = str(tls / "cert.pem") if tls is not None and server == "hypercorn" else None
    client = Client(client_name, protocol, base_url(server, tls) + PATH, args.concurrency, cafile)
    concurrency = args.concurrency

    async def drive(n: int) -> None:
        queue = list(range(n))

        async def worker() -> None:
            while queue:
                answer = await client.post(request_body(queue.pop()))
                assert answer["choices"][0]["message"]["content"] == TEXT

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    async def main() -> tuple[float, float, str]:
        await drive(200)  # warm-up: connections opened, first-use imports done
        cpu0, t0 = time.process_time(), time.perf_counter()
        await drive(args.calls)
        measured = time.process_time() - cpu0, time.perf_counter() - t0
        seen = await client.protocol_seen()
        await client.aclose()
        return (*measured, seen)

    cpu, wall, seen = asyncio.run(main())
    return {"cpu_s": cpu, "wall_s": wall, "http_version": seen}


def run_case(case: str, args: argparse.Namespace, tls: Path | None) -> dict[str, Any]:
    client_name, protocol, server = CASES[case]
    # Connections are counted as distinct client addresses since this reset (the last
    # case's client has exited, so none of its connections is still open).
    before = stats(server, tls, "?reset")
    cmd = [
        sys.executable,
        __file__,
        "client",
        "--case",
        case,
        "--calls",
        str(args.calls),
        "--concurrency",
        str(args.concurrency),
        "--ports",
        args.ports,
    ]
    env = dict(os.environ)
    if tls is not None:
        cmd += ["--cert-dir", str(tls)]
        # agac's HttpSession verifies against the default trust store: let it trust ours.
        env["SSL_CERT_FILE"] = str(tls / "cert.pem")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{case} failed:\n{proc.stderr[-3000:]}")
    after = stats(server, tls)
    measured = json.loads(proc.stdout.strip().splitlines()[-1])
    answered = after["answered"] - before["answered"]
    return {
        "case": case,
        "client": client_name,
        "protocol": protocol,
        "server": server,
        "tls": tls is not None and server == "hypercorn",
        "http_version": measured["http_version"],
        "calls": args.calls,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "bound_per_s": round(args.concurrency / (args.latency_ms / 1000), 1),
        "cpu_ms_per_call": round(measured["cpu_s"] * 1000 / args.calls, 3),
        "calls_per_s": round(args.calls / measured["wall_s"], 1),
        "wall_s": round(measured["wall_s"], 3),
        "connections": after["connections"],
        "server_cpu_ms_per_call": round((after["cpu_s"] - before["cpu_s"]) * 1000 / answered, 3),
        **machine(),
    }


# -- h2-floor: the h2 package's own work per call, no sockets -------------------------------


def h2_floor(calls: int, concurrency: int) -> dict[str, Any]:
    """Client-side CPU per call of the ``h2`` state machine alone (framing, HPACK, flow
    control) plus agac's JSON work, with a server ``H2Connection`` in the same process
    and bytes handed over in memory: a floor for any HTTP/2 client built on ``h2``
    (httpx's and httpx2's both are). Only the client's side is timed."""
    import h2.config
    import h2.connection
    import h2.events

    from agac.jsontext import dumps

    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    server = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, validate_inbound_headers=False)
    )
    client.initiate_connection()
    server.initiate_connection()
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send())
    request_headers = [
        (":method", "POST"),
        (":authority", "127.0.0.1:18791"),
        (":scheme", "http"),
        (":path", PATH),
        ("authorization", "Bearer x"),
        ("content-type", "application/json"),
        ("accept", "application/json"),
        ("user-agent", "agac"),
    ]
    response_headers = [
        (":status", "200"),
        ("content-type", "application/json"),
        ("content-length", str(len(ANSWER))),
    ]
    spent, done = 0.0, 0
    while done < calls:
        t0 = time.process_time()
        streams = []
        for i in range(concurrency):  # a window of calls in flight, as the engine keeps
            stream = client.get_next_available_stream_id()
            streams.append(stream)
            body = dumps(request_body(i)).encode()
            client.send_headers(stream, [*request_headers, ("content-length", str(len(body)))])
            client.send_data(stream, body, end_stream=True)
        sent = client.data_to_send()
        spent += time.process_time() - t0
        for event in server.receive_data(sent):
            if isinstance(event, h2.events.DataReceived):
                server.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        for stream in streams:
            server.send_headers(stream, response_headers)
            server.send_data(stream, ANSWER, end_stream=True)
        answered = server.data_to_send()
        t0 = time.process_time()
        for event in client.receive_data(answered):
            if isinstance(event, h2.events.DataReceived):
                client.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                assert json.loads(event.data)["choices"]
        updates = client.data_to_send()
        spent += time.process_time() - t0
        server.receive_data(updates)
        server.data_to_send()
        done += concurrency
    return {
        "case": "h2-floor",
        "calls": done,
        "concurrency": concurrency,
        "client_cpu_ms_per_call": round(spent * 1000 / done, 3),
        **machine(),
    }


def table(rows: list[dict[str, Any]], cases: list[str]) -> str:
    lines = [
        (
            "| case | protocol seen | client CPU ms/call (median; runs) | calls/s (median) "
            "| connections | server CPU ms/call |"
        ),
        "|---|---|---|---|---|---|",
    ]
    for case in cases:
        mine = [r for r in rows if r["case"] == case]
        if not mine:
            continue
        cpu = [r["cpu_ms_per_call"] for r in mine]
        lines.append(
            f"| {case} | {mine[0]['http_version']} | {statistics.median(cpu):.3f} "
            f"({', '.join(f'{c:.3f}' for c in cpu)}) "
            f"| {statistics.median(r['calls_per_s'] for r in mine):.0f} "
            f"| {statistics.median(r['connections'] for r in mine):.0f} "
            f"| {statistics.median(r['server_cpu_ms_per_call'] for r in mine):.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "role",
        nargs="?",
        default="bench",
        choices=["bench", "client", "serve-hypercorn", "serve-wire", "h2-floor"],
    )
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--max-streams",
        type=int,
        default=100,
        help="the HTTP/2 server's SETTINGS_MAX_CONCURRENT_STREAMS",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="hypercorn over TLS (ALPN h2 / http/1.1) instead of in clear",
    )
    parser.add_argument("--cases", default="all", help=f"all, or some of {','.join(CASES)}")
    parser.add_argument("--case", choices=sorted(CASES))
    parser.add_argument(
        "--ports",
        default=f"{PORTS['hypercorn']},{PORTS['wire']}",
        help="the hypercorn server's port and the wire server's",
    )
    parser.add_argument("--port", type=int)
    parser.add_argument("--cert-dir")
    args = parser.parse_args()
    PORTS["hypercorn"], PORTS["wire"] = (int(port) for port in args.ports.split(","))
    if args.role == "client":
        print(json.dumps(client_case(args.case, args)))
        return
    if args.role == "h2-floor":
        for _ in range(args.repeats):
            print(json.dumps(h2_floor(args.calls * 10, args.concurrency)), flush=True)
        return
    if args.role == "serve-hypercorn":
        serve_hypercorn(
            args.port,
            args.latency_ms / 1000,
            args.max_streams,
            Path(args.cert_dir) if args.cert_dir else None,
        )
        return
    if args.role == "serve-wire":
        serve_wire(args.port, args.latency_ms / 1000)
        return
    cases = list(CASES) if args.cases == "all" else args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    with tempfile.TemporaryDirectory() as folder:
        tls = Path(folder) if args.tls else None
        if tls is not None:
            make_cert(tls)
        servers = [start_server(kind, args, tls) for kind in sorted({CASES[c][2] for c in cases})]
        rows = []
        try:
            for repeat in range(args.repeats):
                shift = repeat % len(cases)
                for case in cases[shift:] + cases[:shift]:  # interleaved, order rotated
                    row = run_case(case, args, tls)
                    row["repeat"] = repeat
                    print(json.dumps(row), flush=True)
                    rows.append(row)
        finally:
            for server in servers:
                server.terminate()
                server.wait(timeout=10)
    print(
        f"\n{args.calls} calls, {args.concurrency} in flight, {args.latency_ms:g} ms server "
        f"latency, h2 max streams {args.max_streams}, tls={args.tls}, {machine()}"
    )
    print(table(rows, cases))


if __name__ == "__main__":
    main()
