"""Open the providers a workflow uses, checking SDKs and credentials before any paid call."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from agac.errors import ConfigError, Problem
from agac.installing import install_hint
from agac.providers.base import Provider, ProviderSettings, Transport
from agac.providers.registry import (
    credentials_missing,
    provider_class,
    provider_spec,
    sdk_installed,
)

if TYPE_CHECKING:
    from agac.config.project import ProjectConfig

__all__ = ["open_providers", "provider_settings"]


def provider_settings(
    name: str, config: ProjectConfig | None, *, connections: int = 0, batch: bool = False
) -> ProviderSettings:
    pc = (config.providers.get(name) if config else None) if config else None
    api_key = os.environ.get(pc.api_key_env) if pc and pc.api_key_env else None
    options = dict(pc.options) if pc else {}
    if pc and pc.batch_submissions_per_minute is not None:
        options["batch_submissions_per_minute"] = pc.batch_submissions_per_minute
    transport: Transport = "sdk" if pc and pc.transport == "sdk" else "lean"
    return ProviderSettings(
        name=name,
        base_url=pc.base_url if pc else None,
        api_key=api_key,
        options=options,
        transport=transport,
        connections=connections,
        batch=batch,
    )


def open_providers(
    names: Iterable[str],
    config: ProjectConfig | None,
    *,
    connections: Mapping[str, int] | None = None,
    batch: Collection[str] = (),
) -> dict[str, Provider]:
    """One instance per provider name. Raises ConfigError (``provider_not_installed``,
    ``missing_credentials``) for all of them at once, before anything is sent.

    ``connections`` bounds each provider's open connections on the lean transport
    (the engine passes the summed ``max_concurrency`` of the actions using it);
    ``batch`` names the providers the run may send batches to.
    """
    problems: list[Problem] = []
    out: dict[str, Provider] = {}
    for name in sorted(set(names)):
        cls = provider_class(name)
        spec = provider_spec(name)
        if not sdk_installed(spec):
            problems.append(
                Problem(
                    "provider_not_installed",
                    f"provider {name!r} needs its SDK ({spec.sdk_module})",
                    hint=install_hint(spec.extra),
                )
            )
            continue
        settings = provider_settings(
            name, config, connections=(connections or {}).get(name, 0), batch=name in batch
        )
        missing = credentials_missing(spec, settings.api_key)
        if missing:
            problems.append(
                Problem(
                    "missing_credentials",
                    f"provider {name!r} has no API key",
                    hint=f"set {' or '.join(missing)}, or run against the emulator: "
                    'eval "$(agac emulator env)"',
                )
            )
            continue
        try:
            out[name] = cls(settings)
        except ConfigError as exc:  # e.g. the lean transport without aiohttp
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems=problems)
    return out
