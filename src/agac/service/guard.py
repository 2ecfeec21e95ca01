"""The service's door (T4), one ASGI middleware in front of every route.

In order, for every HTTP request:

1. **Trusted host.** A ``Host`` header the service was not configured for is refused
   (400): a page of another site whose name was made to resolve to this machine (DNS
   rebinding) sends its own name.
2. **Security headers** on every response: ``Content-Security-Policy: default-src 'self'``
   (no inline scripts or styles; only our own files), ``frame-ancestors 'none'``,
   ``nosniff``, no referrer leaving the site, ``Cache-Control: no-store`` on everything
   but static files, HSTS when served over TLS.
3. **Who is asking.** ``/login`` and ``/static/…`` are open (for one person on a local
   project, ``/login`` only trades the one-time link's token for a session:
   :mod:`agac.service.owner`). ``/api/…`` accepts only
   ``Authorization: Bearer TOKEN`` (cookies are ignored there): else 401. Every other
   path accepts only the session cookie: else a redirect to ``/login`` (303). The user
   is re-read from the store on every request (a disabled user stops at once).
4. **Forms.** Every page request that changes something (any method but GET and HEAD)
   must carry an ``Origin`` equal to the service's own, and — once signed in — a
   ``csrf_token`` form field derived from the session; else 403. The body is read here,
   checked, and handed on unchanged.

Because this sits in front of the router, a route added later is locked the same way:
``tests/service/test_t4_routes.py`` asks every route of the app, anonymously.
"""

from __future__ import annotations

import hmac
import json
import urllib.parse
from http.cookies import SimpleCookie
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agac.api.identity import csrf_token, session_principal, token_principal
from agac.service.context import ServiceContext

__all__ = ["CSP", "PRINCIPAL", "SESSION_ID", "Guard", "cookie_value", "request_origin"]

CSP = (
    "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
    "object-src 'none'"
)
PRINCIPAL = "agac.principal"
SESSION_ID = "agac.session"
MAX_FORM = 256 * 1024
OPEN_PATHS = ("/login",)
SAFE_METHODS = ("GET", "HEAD")


def cookie_value(headers: Headers, name: str) -> str:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed Cookie header is no cookie
        return ""
    morsel = jar.get(name)
    return morsel.value if morsel is not None else ""


def request_origin(scope: Scope) -> str:
    """The origin a page of this service has: scheme (as the client sees it) and Host."""
    headers = Headers(scope=scope)
    return f"{scope.get('scheme', 'http')}://{headers.get('host', '')}".lower()


class Guard:
    def __init__(self, app: ASGIApp, ctx: ServiceContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = self._headers_added(scope, send)
        headers = Headers(scope=scope)
        if headers.get("host", "").lower() not in self.ctx.exposure.hosts:
            await _plain(send, 400, "this service does not answer to that host name")
            return
        path: str = scope["path"]
        if path.startswith("/static/"):
            await self.app(scope, receive, send)
            return
        if path == "/api" or path.startswith("/api/"):
            await self._api(scope, receive, send, headers)
            return
        await self._page(scope, receive, send, headers, path)

    async def _api(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        principal = None
        if scheme.lower() == "bearer" and token.strip():
            principal = await run_in_threadpool(
                token_principal, self.ctx.store, token.strip(), clock=self.ctx.clock
            )
        if principal is None:
            await _json(
                send,
                401,
                "unauthenticated",
                "send Authorization: Bearer TOKEN with a valid token (agac tokens create NAME)",
                {"www-authenticate": "Bearer"},
            )
            return
        scope[PRINCIPAL] = principal
        await self.app(scope, receive, send)

    async def _page(
        self, scope: Scope, receive: Receive, send: Send, headers: Headers, path: str
    ) -> None:
        changing = scope["method"] not in SAFE_METHODS
        if changing and headers.get("origin", "").lower() != request_origin(scope):
            await _plain(
                send, 403, "refused: this form did not come from this service's own pages (Origin)"
            )
            return
        if path in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        session_id = cookie_value(headers, self.ctx.exposure.cookie)
        principal = None
        if session_id and self.ctx.owner is not None:
            principal = await run_in_threadpool(
                self.ctx.owner.principal, self.ctx.store, session_id
            )
        elif session_id:
            principal = await run_in_threadpool(
                session_principal, self.ctx.store, session_id, clock=self.ctx.clock
            )
        if principal is None:
            target = path + (
                f"?{scope['query_string'].decode('latin-1')}" if scope.get("query_string") else ""
            )
            location = "/login?" + urllib.parse.urlencode({"next": target})
            await _redirect(send, location if not changing else "/login")
            return
        scope[PRINCIPAL] = principal
        scope[SESSION_ID] = session_id
        if changing:
            body = await _read_body(receive)
            if body is None:
                await _plain(send, 413, "the form is too large")
                return
            sent = csrf_field(headers, body)
            if not hmac.compare_digest(sent, csrf_token(session_id)):
                await _plain(
                    send,
                    403,
                    "refused: the form's CSRF token is missing or wrong; "
                    "reload the page and try again",
                )
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    def _headers_added(self, scope: Scope, send: Send) -> Send:
        static = scope.get("path", "").startswith("/static/")
        secure = self.ctx.exposure.secure

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in (b"content-security-policy", b"cache-control")
                    or (static and k.lower() == b"cache-control")
                ]
                raw += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"same-origin"),
                    (b"cross-origin-opener-policy", b"same-origin"),
                ]
                if not static:
                    raw.append((b"cache-control", b"no-store"))
                if secure:
                    raw.append((b"strict-transport-security", b"max-age=31536000"))
                message = {**message, "headers": raw}
            await send(message)

        return wrapped


def csrf_field(headers: Headers, body: bytes) -> str:
    """The ``csrf_token`` field of a urlencoded form body ('' when there is none)."""
    if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return ""
    try:
        fields = urllib.parse.parse_qs(body.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        return ""
    values = fields.get("csrf_token") or [""]
    return values[0]


async def _read_body(receive: Receive) -> bytes | None:
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return body
        body += message.get("body", b"")
        if len(body) > MAX_FORM:
            return None
        if not message.get("more_body"):
            return body


def _replay(body: bytes, receive: Receive) -> Receive:
    done = False

    async def replayed() -> Message:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _start(
    send: Send, status: int, content_type: str, body: bytes, extra: dict[str, str] | None = None
) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _plain(send: Send, status: int, text: str) -> None:
    await _start(send, status, "text/plain; charset=utf-8", (text + "\n").encode())


async def _json(
    send: Send, status: int, code: str, message: str, extra: dict[str, str] | None = None
) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await _start(send, status, "application/json", body, extra)


async def _redirect(send: Send, location: str) -> None:
    await _start(send, 303, "text/plain; charset=utf-8", b"sign in first\n", {"location": location})


def principal_of(scope: Any) -> Any:
    return scope[PRINCIPAL]
