"""Azure OpenAI's wire protocol: OpenAI's shapes behind Azure's door, on both surfaces.

Served under ``/azure/openai`` (point ``AZURE_OPENAI_ENDPOINT`` at ``<emulator>/azure``):
the classic surface — chat at ``/deployments/{deployment}/chat/completions``, files and
batches at ``/files`` and ``/batches``, every call with the ``api-version`` query — and
the ``/v1/`` surface, which takes the deployment as ``model`` and needs no version. Both
want an ``api-key`` header (or an Entra ``Authorization: Bearer`` token). The rest is
Azure's batch rules: a line's ``body.model`` is the deployment, one deployment per file
(``model_mismatch``); a file with a UTF-8 BOM is refused (with Azure's misleading "no
valid deployment name"); an uploaded file may read ``pending`` for a while (the
``file_pending`` fault) and a batch cannot be created from it; a batch never expires; an
enqueued-token quota refusal on create is an ``http`` fault with code
``token_limit_exceeded``. Answers carry ``content_filter_results`` per choice and
``prompt_filter_results`` (a ``reply.filter`` fault flags a category); an ``http`` 400
fault with code ``content_filter`` (on ``chat``, or on one batch item) is Azure's refusal
of the prompt, its ``innererror.content_filter_result`` naming what was filtered.
"""

from __future__ import annotations

from dataclasses import replace

from starlette.routing import Route

from .openai import Flavor
from .openai import routes as openai_routes

__all__ = ["AZURE", "AZURE_V1", "routes"]

AZURE = Flavor(
    provider="azure",
    prefix="/azure/openai",
    file_prefix="file-",
    batch_prefix="batch_",
    retry_after_ms=True,
    service_tier="default",
    windows=frozenset({"24h"}),
    cursor_paging=False,
    usage_timings=False,
    batch_urls=frozenset({"/chat/completions", "/v1/chat/completions"}),
    deployments=True,
    azure=True,
    api_version=True,
)
# The /openai/v1/ surface: the same service, with no deployments in the path and no
# api-version.
AZURE_V1 = replace(AZURE, prefix="/azure/openai/v1", deployments=False, api_version=False)


def routes() -> list[Route]:
    """Azure's routes on both surfaces (the ``/v1`` ones first: they are the longer)."""
    return [*openai_routes(AZURE_V1), *openai_routes(AZURE)]
