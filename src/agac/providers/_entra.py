"""Microsoft Entra ID bearer tokens for Azure OpenAI, when no API key is set.

A token comes from ``AZURE_OPENAI_AD_TOKEN`` (fixed, as the openai SDK reads it), else
from azure-identity's ``DefaultAzureCredential`` (the ``azure`` extra): a service
principal's variables (``AZURE_TENANT_ID``, ``AZURE_CLIENT_ID``, ``AZURE_CLIENT_SECRET``),
workload identity, a managed identity, ``az login``, … — through its bearer-token
provider for Azure OpenAI's scope. That provider keeps the token and asks the credential
for a new one when it is within five minutes of expiring, so asking it before every call
(both transports do) never sends an expired token, however long the run.

The credential is synchronous and may call its token endpoint when it refreshes: it runs
on a worker thread, never on the event loop. Its failures are translated here, the
adapter's boundary: no credential found is ``missing_credentials`` (the action cannot
run), a sign-in the endpoint refused is retryable (a managed-identity endpoint that
hiccups), each naming the fix.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass

from agac.errors import ConfigError, ProviderError, RetryableError, UnsupportedError
from agac.providers._common import import_sdk

__all__ = ["ENTRA_SCOPE", "EntraToken", "entra_token"]

ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
"""The scope of an Entra token for Azure OpenAI."""

_FIX = (
    "set AZURE_OPENAI_API_KEY, or give azure-identity a credential: a managed identity, "
    "AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET, or `az login`"
)


@dataclass(frozen=True)
class EntraToken:
    """Where the bearer token of each call comes from (see the module docstring)."""

    get: Callable[[], str]
    """The token now: fixed, or azure-identity's provider (cached, refreshed near expiry)."""
    unavailable: tuple[type[BaseException], ...] = ()
    """azure-identity's "no credential here" errors."""
    refused: tuple[type[BaseException], ...] = ()
    """azure-identity's "the sign-in failed" errors (the parents of the above)."""

    async def bearer(self) -> str:
        """The token to send now; a failed sign-in as agac's taxonomy."""
        if not self.refused:  # a fixed token: nothing to fetch
            return self.get()
        try:
            return await asyncio.to_thread(self.get)
        except self.refused as exc:
            raise _translated(exc, unavailable=isinstance(exc, self.unavailable)) from exc


def entra_token() -> EntraToken | None:
    """The token source when no API key is set: ``AZURE_OPENAI_AD_TOKEN``, else
    azure-identity's default credential; None when azure-identity is not installed."""
    fixed = os.environ.get("AZURE_OPENAI_AD_TOKEN")
    if fixed:
        return EntraToken(lambda: fixed)
    try:
        identity = import_sdk("azure.identity", "azure")
        core = import_sdk("azure.core.exceptions", "azure")
    except ConfigError:
        return None
    provider: Callable[[], str] = identity.get_bearer_token_provider(
        identity.DefaultAzureCredential(), ENTRA_SCOPE
    )
    return EntraToken(
        provider,
        unavailable=(identity.CredentialUnavailableError,),
        refused=(core.ClientAuthenticationError,),
    )


def _translated(exc: BaseException, *, unavailable: bool) -> ProviderError:
    said = " ".join(str(exc).split())[:400] or type(exc).__name__
    if unavailable:
        return UnsupportedError(
            f"azure: no Entra ID credential found ({said}): {_FIX}",
            code="missing_credentials",
        )
    return RetryableError(f"azure: the Entra ID sign-in failed ({said}): {_FIX}")
