"""Opening object storage (S3, Google Cloud Storage, Azure) through obstore: the one place
where agac turns a URL and its settings into a client.

Storage points (``store: s3://…`` with ``store_options:``), input prefixes
(``input.path: s3://…``) and exports (``agac export --out s3://…``, both with
``object_options:``) open their stores here, so every one of them reads credentials and
settings the same way:

- endpoint, region and credentials come from the standard environment, which obstore
  reads (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
  ``AWS_REGION``, ``AWS_ENDPOINT_URL``; ``GOOGLE_SERVICE_ACCOUNT`` /
  ``GOOGLE_APPLICATION_CREDENTIALS``; ``AZURE_STORAGE_ACCOUNT_NAME``,
  ``AZURE_STORAGE_ACCOUNT_KEY``, …); ``AWS_ALLOW_HTTP=true`` allows a plain-HTTP endpoint;
- the options mapping adds to it or overrides it: client keys (``allow_http``,
  ``timeout``, ``connect_timeout``, ``proxy_url``, …) go to the HTTP client,
  ``max_retries`` and ``retry_timeout`` (seconds) to its retries, every other key to the
  store's configuration (``endpoint``, ``region``, ``skip_signature``, …).

Nothing else in agac imports obstore's constructors.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from agac.errors import ConfigError, Problem
from agac.installing import install_hint

__all__ = [
    "CLIENT_KEYS",
    "CLOUD_SCHEMES",
    "RETRY_KEYS",
    "is_cloud_url",
    "open_cloud_store",
    "require_obstore",
    "split_client_options",
]

CLOUD_SCHEMES = ("s3", "gs", "az", "azure", "abfs", "abfss")
"""URL schemes served through obstore (``az``/``azure``/``abfs[s]`` are Azure's)."""

CLIENT_KEYS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "default_content_type",
        "http1_only",
        "http2_only",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "proxy_url",
        "timeout",
        "user_agent",
    }
)
RETRY_KEYS = frozenset({"max_retries", "retry_timeout"})


def is_cloud_url(text: str) -> bool:
    """True for ``s3://…``, ``gs://…``, ``az://…`` (and Azure's other schemes)."""
    scheme, sep, _ = text.strip().partition("://")
    return bool(sep) and scheme.lower() in CLOUD_SCHEMES


def _truthy(value: Any) -> Any:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def split_client_options(
    options: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(store config, client options, retry config) from an options mapping, with
    ``AWS_ALLOW_HTTP=true`` from the environment when ``allow_http`` is not given."""
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    retry: dict[str, Any] = {}
    for key, value in (options or {}).items():
        if key in CLIENT_KEYS:
            client[key] = _truthy(value)
        elif key in RETRY_KEYS:
            retry[key] = timedelta(seconds=float(value)) if key == "retry_timeout" else int(value)
        else:
            config[key] = value
    if "allow_http" not in client and os.environ.get("AWS_ALLOW_HTTP", "").lower() == "true":
        client["allow_http"] = True
    return config, client, retry


def require_obstore(what: str) -> Any:
    """The obstore module; ConfigError ``provider_not_installed`` naming ``what`` needs it."""
    try:
        import obstore
    except ImportError as exc:
        raise ConfigError(
            problems=[
                Problem(
                    "provider_not_installed",
                    f"{what} needs obstore",
                    hint=install_hint("objectstore"),
                )
            ]
        ) from exc
    return obstore


def open_cloud_store(url: str, options: Mapping[str, Any] | None, what: str) -> Any:
    """The obstore store of ``url`` (a bucket or container, with or without a prefix).

    ``what`` names the user of the store in messages (``the storage point s3://…``).
    Raises ConfigError ``provider_not_installed`` without obstore; obstore's own errors
    (an unknown configuration key, a malformed URL) are the caller's to translate.
    """
    require_obstore(what)
    from obstore.store import from_url

    config, client, retry = split_client_options(options)
    return from_url(
        url,
        config=config or None,  # type: ignore[arg-type]
        client_options=client or None,  # type: ignore[arg-type]
        retry_config=retry or None,  # type: ignore[arg-type]
    )
