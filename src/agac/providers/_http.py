"""The lean transport for online calls (P1).

Online calls are agac's hot path. Through an official SDK each call builds and
validates the SDK's request and response models and walks its HTTP stack: about
2.5 ms of CPU per call here, more than everything else agac does for it. The lean
transport speaks the wire protocol directly: one shared aiohttp session per adapter
(pooled, keep-alive, at most ``connections`` open at once), the body built from the
canonical request as the adapter already does for batch lines, the answer read as
JSON straight into :class:`~agac.providers.base.Response`. The SDKs stay for batch
and file APIs, and for online calls under ``transport: sdk``.

Errors keep one mapping per provider: the adapter hands :meth:`HttpSession.post` a
function from (status, headers, parsed body, text) to the taxonomy error, the same
function its SDK path calls with what the SDK exception carries. The taxonomy error is
raised ``from`` an :class:`HttpStatusError` holding the provider's answer. Lost
connections and timeouts are :func:`~agac.providers._errors.connection_error`, as on
the SDK path.

aiohttp is the ``http`` extra, which every provider extra pulls in; it is imported
when an adapter with the lean transport is built, and its absence is reported as
``provider_not_installed`` naming the extra.
"""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from agac import __version__
from agac.errors import ConfigError, Problem, ProviderError, RetryableError
from agac.installing import install_hint
from agac.jsontext import dumps
from agac.providers._errors import connection_error
from agac.providers.base import TRANSPORTS

__all__ = [
    "DEFAULT_CONNECTIONS",
    "TRANSPORTS",
    "ErrorMapper",
    "HttpSession",
    "HttpStatusError",
    "import_aiohttp",
]

#: Connections per adapter when the engine does not say (aiohttp's own default).
DEFAULT_CONNECTIONS = 100
#: Bodies over this many bytes (a request with attachments) are sent from a stream.
LARGE_BODY = 1 << 20
#: Seconds an idle pooled connection is kept open.
KEEPALIVE_SECONDS = 30.0
USER_AGENT = f"agac/{__version__}"

ErrorMapper = Callable[[int, Mapping[str, str], Any, str], ProviderError]
"""(HTTP status, response headers, parsed JSON body or None, body text) -> taxonomy error."""


class HttpStatusError(Exception):
    """A provider answered an online call with a status other than 2xx (lean transport).

    It is the ``__cause__`` of the taxonomy error the adapter raises: the provider's
    status, headers and body, for whoever debugs the failure.
    """

    def __init__(self, status: int, headers: Mapping[str, str], body: Any, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:500]}")
        self.status = status
        self.headers = headers
        self.body = body
        self.text = text


def import_aiohttp(provider: str) -> Any:
    """aiohttp, or ConfigError ``provider_not_installed`` naming the ``http`` extra."""
    try:
        return importlib.import_module("aiohttp")
    except ImportError as exc:
        problem = Problem(
            "provider_not_installed",
            f"the {provider} provider's online calls need the 'aiohttp' package",
            hint=f"{install_hint(provider)} (or the http extra), "
            f"or set providers: {provider}: transport: sdk in agac.yml",
        )
        raise ConfigError(problems=[problem]) from exc


class HttpSession:
    """One adapter's HTTP client: a pooled keep-alive aiohttp session, opened on the
    first call in the running event loop (aiohttp binds a session to its loop) and
    closed by :meth:`aclose`.

    ``headers`` go with every request (auth and API version, as the provider's SDK
    sends them); ``connections`` bounds the open connections (the engine passes the
    sum of the ``max_concurrency`` of the actions on this provider); ``timeout`` is the
    default seconds per call, ``None`` for none.
    """

    def __init__(
        self,
        provider: str,
        headers: Mapping[str, str],
        *,
        connections: int = 0,
        timeout: float | None = None,
    ) -> None:
        self.provider = provider
        self._aiohttp = import_aiohttp(provider)
        self._url_type = importlib.import_module("yarl").URL  # aiohttp's own URL type
        self._headers = {
            "User-Agent": USER_AGENT,
            "Accept": "application/json",
            "Content-Type": "application/json",
            **headers,
        }
        self.connections = connections if connections > 0 else DEFAULT_CONNECTIONS
        self.timeout = timeout
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timeouts: dict[float | None, Any] = {}
        self._proxies: dict[str, str | None] = {}
        self._urls: dict[str, Any] = {}
        self._connection_errors = (self._aiohttp.ClientError, asyncio.TimeoutError)

    def _open(self) -> Any:
        aiohttp = self._aiohttp
        connector = aiohttp.TCPConnector(
            limit=self.connections,
            limit_per_host=0,
            keepalive_timeout=KEEPALIVE_SECONDS,
            ttl_dns_cache=300,
        )
        # trust_env would look up proxies and .netrc in a worker thread on every call
        # (two thread hops per request); the proxy is read from the environment once
        # per URL instead (:func:`env_proxy`), and auth is in the headers.
        self._session = aiohttp.ClientSession(
            connector=connector, headers=self._headers, auto_decompress=True, trust_env=False
        )
        self._loop = asyncio.get_running_loop()
        return self._session

    def _client_timeout(self, seconds: float | None) -> Any:
        found = self._timeouts.get(seconds)
        if found is None:
            found = self._timeouts[seconds] = self._aiohttp.ClientTimeout(total=seconds)
        return found

    async def post(
        self,
        url: str,
        body: Any,
        *,
        errors: ErrorMapper,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """POST ``body`` as JSON to ``url`` and return the parsed JSON answer.

        A non-2xx answer raises ``errors(status, headers, parsed body, text)`` from an
        :class:`HttpStatusError`; a lost connection or a timeout raises a RetryableError.
        ``timeout`` (seconds) overrides the session's default for this call.
        """
        answer, _ = await self._send(
            "POST", url, dumps(body).encode(), errors=errors, timeout=timeout, headers=headers
        )
        return answer

    async def post_with_headers(
        self,
        url: str,
        body: Any,
        *,
        errors: ErrorMapper,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[Any, Mapping[str, str]]:
        """:meth:`post`, and the answer's headers (where the provider's request id is)."""
        return await self._send(
            "POST", url, dumps(body).encode(), errors=errors, timeout=timeout, headers=headers
        )

    async def post_encoded(
        self,
        url: str,
        data: bytes,
        *,
        errors: ErrorMapper,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[Any, Mapping[str, str]]:
        """:meth:`post_with_headers` of a JSON body encoded already."""
        return await self._send("POST", url, data, errors=errors, timeout=timeout, headers=headers)

    async def get(self, url: str, *, errors: ErrorMapper, timeout: float | None = None) -> Any:
        """GET ``url`` and return the parsed JSON answer (errors as :meth:`post`)."""
        answer, _ = await self._send("GET", url, None, errors=errors, timeout=timeout, headers=None)
        return answer

    async def exchange(
        self,
        method: str,
        url: str,
        data: bytes | None = None,
        *,
        errors: ErrorMapper,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[bytes, Mapping[str, str]]:
        """Send ``data`` as it is (no JSON) and return the answer's raw body and headers:
        for protocols that speak in headers, a resumable upload's steps (errors as
        :meth:`post`)."""
        return await self._exchange(
            method, url, data, errors=errors, timeout=timeout, headers=headers
        )

    async def _send(
        self,
        method: str,
        url: str,
        data: bytes | None,
        *,
        errors: ErrorMapper,
        timeout: float | None,
        headers: Mapping[str, str] | None,
    ) -> tuple[Any, Mapping[str, str]]:
        raw, answered = await self._exchange(
            method, url, data, errors=errors, timeout=timeout, headers=headers
        )
        try:
            return json.loads(raw), answered
        except ValueError as exc:
            raise RetryableError(f"{self.provider}: the answer is not JSON: {raw[:200]!r}") from exc

    async def _exchange(
        self,
        method: str,
        url: str,
        data: bytes | None,
        *,
        errors: ErrorMapper,
        timeout: float | None,
        headers: Mapping[str, str] | None,
    ) -> tuple[bytes, Mapping[str, str]]:
        session = self._session
        if session is None or session.closed or self._loop is not asyncio.get_running_loop():
            session = self._open()
        seconds = timeout if timeout is not None else self.timeout
        proxy = self._proxies[url] if url in self._proxies else self._proxy(url)
        target = self._urls.get(url) or self._url(url)
        body: bytes | io.BytesIO | None = data
        if data is not None and len(data) > LARGE_BODY:
            body = io.BytesIO(data)  # written in chunks, not in one blocking send
        try:
            async with session.request(
                method,
                target,
                data=body,
                headers=headers,
                proxy=proxy,
                timeout=self._client_timeout(seconds),
            ) as response:
                raw = await response.read()
                status = response.status
                answered = response.headers
                if not 200 <= status < 300:
                    self._fail(status, answered, raw, errors)
        except self._connection_errors as exc:
            raise connection_error(self.provider, exc) from exc
        return raw, answered

    def _url(self, url: str) -> Any:
        """``url`` as sent: adapters build it percent-encoded already (a model name goes
        in through :func:`~agac.providers._common.url_path`), so it is taken as encoded.
        yarl would otherwise decode escapes it deems safe in a path (``%3A`` back to
        ``:``, which a Gemini model name must not carry) and resolve dot segments."""
        found = self._urls[url] = self._url_type(url, encoded=True)
        return found

    def _proxy(self, url: str) -> str | None:
        found = self._proxies[url] = env_proxy(url)
        return found

    @staticmethod
    def _fail(status: int, headers: Mapping[str, str], raw: bytes, errors: ErrorMapper) -> None:
        text = raw.decode("utf-8", errors="replace")
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        cause = HttpStatusError(status, headers, parsed, text)
        raise errors(status, headers, parsed, text) from cause

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``ALL_PROXY``, minus ``NO_PROXY``), as the SDKs' HTTP clients honour them."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")
