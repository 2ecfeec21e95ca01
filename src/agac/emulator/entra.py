"""Microsoft Entra ID for Azure OpenAI: a managed identity's token endpoint.

Served at ``/azure/identity/token`` in the form of App Service's managed-identity
endpoint, which azure-identity's ``ManagedIdentityCredential`` (and so
``DefaultAzureCredential``) calls when ``IDENTITY_ENDPOINT`` and ``IDENTITY_HEADER`` are
set — on App Service too it is plain HTTP on loopback. A call is ``GET`` with
``api-version=2019-08-01``, the ``resource`` whose token it wants and the
``X-IDENTITY-HEADER`` secret; the answer is ``{access_token, expires_on, resource,
token_type, client_id}``, ``expires_on`` in epoch seconds as text. A missing secret is a
401, a resource other than Azure OpenAI's a 400 (as App Service answers them).

A token lives ``token_seconds`` (3600 unless ``POST /_emulator/entra`` sets it), counted
on the wall clock, as the credential counts it; Azure's front door
(:func:`agac.emulator.azure_front.azure_guard`) refuses a token it issued once it has expired.
Calls are counted and journaled as provider ``azure``, op ``token`` (faults apply).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .handling import ErrorRenderer, gate, state_of

__all__ = ["RESOURCE", "routes"]

#: The resource an Azure OpenAI token is for (the scope's ``/.default`` removed).
RESOURCE = "https://cognitiveservices.azure.com"
_CLIENT_ID = "00000000-0000-0000-0000-00000000e5e5"


def _error(
    status: int, code: str | None, retry_after: float | None, message: str | None
) -> Response:
    return JSONResponse(
        {"statusCode": status, "message": message or f"Emulated error {status} ({code})."},
        status_code=status,
    )


_render: ErrorRenderer = _error


async def token(request: Request) -> Response:
    await gate(request, "azure", "token", _render)
    if not request.headers.get("x-identity-header"):
        return _error(401, None, None, "The X-IDENTITY-HEADER header is missing.")
    resource = request.query_params.get("resource", "").rstrip("/")
    if resource != RESOURCE:
        return _error(400, None, None, f"No token for resource {resource!r}.")
    issued, expires = state_of(request).entra.issue()
    return JSONResponse(
        {
            "access_token": issued,
            "expires_on": str(int(expires)),
            "resource": RESOURCE,
            "token_type": "Bearer",
            "client_id": _CLIENT_ID,
        }
    )


def routes() -> list[Route]:
    return [Route("/azure/identity/token", token, methods=["GET"])]
