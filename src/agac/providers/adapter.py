"""The base every built-in adapter starts from, and a plugin may: the constructor and the
error translation that each adapter would otherwise repeat.

:class:`ProviderBase` reads the adapter's :class:`~agac.providers.spec.ProviderSpec`: it
resolves the API key (``missing_credentials`` naming the variables), the base URL and the
batch/file timeout, opens the lean transport's session when the settings ask for it, and
loads the SDK at once when it will be needed (``transport: sdk``, or a run that sends
batches) instead of at the first call. :meth:`ProviderBase._translate_errors` is the one
place an SDK exception becomes agac's taxonomy: the adapter says what its SDK's
exceptions mean (:meth:`ProviderBase._sdk_error`, :meth:`ProviderBase._sdk_root_errors`);
connection failures and timeouts of the HTTP stacks below the SDKs are retryable, so is
an answer the SDK cannot parse (a body of an odd shape fails its unit, never the run), and
everything is re-raised ``from`` its cause.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

from agac.errors import FatalError, ProviderError
from agac.providers._common import import_sdk, resolve_api_key, resolve_base_url
from agac.providers._errors import (
    connection_error,
    malformed_answer,
    shape_errors,
    transport_errors,
)
from agac.providers._http import HttpSession
from agac.providers.base import ProviderSettings
from agac.providers.spec import ProviderSpec

__all__ = ["DEFAULT_TIMEOUT", "ProviderBase"]

DEFAULT_TIMEOUT = 600.0
"""Seconds of each batch and file call when ``providers: <name>: timeout`` is not set."""


class ProviderBase:
    """Settings, credentials, the lean session, the lazily built SDK client and the error
    boundary of one adapter (see the module docstring).

    A subclass sets ``spec`` (the lean session opens when its ``transports`` name
    ``lean``, the SDK loads at once when it names an ``sdk_module``); ``base_url_env`` (the SDK's own base-URL variable, read when
    agac.yml gives none); and implements :meth:`_make_client` (the SDK's async client,
    SDK retries off), :meth:`_lean_headers` and :meth:`_open_lean` (what the lean
    transport sends to), :meth:`_sdk_error` and :meth:`_sdk_root_errors`.
    """

    spec: ClassVar[ProviderSpec]
    base_url_env: ClassVar[str | None] = None

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self._api_key = self._resolve_key(settings)
        env = self.base_url_env
        self._base_url = resolve_base_url(settings, env) if env else settings.base_url
        self._timeout = float(settings.options.get("timeout") or DEFAULT_TIMEOUT)
        self._sdk_module: Any = None
        self._sdk_client: Any = None
        self._http: HttpSession | None = None
        if settings.transport == "lean" and "lean" in self.spec.transports:
            self._http = HttpSession(
                self.name,
                self._lean_headers(),
                connections=settings.connections,
                timeout=self._lean_timeout(),
            )
            self._open_lean()
        if self.spec.sdk_module and (settings.transport == "sdk" or settings.batch):
            self._client  # noqa: B018 - the SDK is needed: load it now, not at the first call

    @property
    def name(self) -> str:
        return self.spec.name

    def _resolve_key(self, settings: ProviderSettings) -> str:
        """The API key (agac.yml's, else the first of the spec's variables that is set);
        an adapter that needs none (empty ``credential_env``) gets ``""``."""
        if not self.spec.credential_env:
            return settings.api_key or ""
        return resolve_api_key(settings, self.spec.credential_env)

    @property
    def _sdk(self) -> Any:
        """The SDK module, imported on first use (``provider_not_installed`` naming the
        extra when it is missing)."""
        if self._sdk_module is None:
            self._sdk_module = import_sdk(str(self.spec.sdk_module), self.spec.extra)
        return self._sdk_module

    @property
    def _client(self) -> Any:
        """The SDK's async client, built on first use."""
        if self._sdk_client is None:
            self._sdk_client = self._make_client()
        return self._sdk_client

    def _make_client(self) -> Any:
        raise NotImplementedError

    def _lean_headers(self) -> Mapping[str, str]:
        """The headers the SDK authenticates with, for the lean transport."""
        return {}

    def _lean_timeout(self) -> float | None:
        """The lean session's default timeout of a call (a live call is timed by its
        action's ``timeout``)."""
        return self._timeout

    def _open_lean(self) -> None:
        """Work out the lean transport's URLs (the session is open)."""

    # -- errors --------------------------------------------------------------

    def _sdk_error(self, exc: Exception) -> ProviderError | None:
        """``exc`` as the taxonomy error when it is one of the SDK's own status or
        connection errors; None otherwise."""
        return None

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        """The SDK's root exception classes: what is left of them is fatal."""
        return ()

    @contextmanager
    def _translate_errors(self) -> Iterator[None]:
        """The one place this adapter's SDK exceptions become agac's taxonomy."""
        try:
            yield
        except ProviderError:
            raise
        except Exception as exc:
            err = self._sdk_error(exc)
            if err is None and isinstance(exc, transport_errors()):
                err = connection_error(self.name, exc)  # e.g. a stream cut while reading
            if err is None and isinstance(exc, shape_errors()):
                err = malformed_answer(self.name, exc)  # an answer the SDK cannot parse
            if err is None and isinstance(exc, self._sdk_root_errors()):
                err = FatalError(f"{self.name}: {exc}")
            if err is None:
                raise
            raise err from exc

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        if self._sdk_client is not None:
            await self._sdk_client.close()
