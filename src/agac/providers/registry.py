"""Provider plugins: every provider, built-in or third-party, registers under the
entry point group ``agac.providers`` (name -> ``module:Class``).

Loading a provider class imports only its adapter module; the adapter imports its
SDK lazily when it is constructed, so the core install stays light and a missing SDK
is reported as ``provider_not_installed`` naming the extra.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any

from agac.errors import ConfigError, Problem
from agac.providers.base import batch_support
from agac.providers.options import Option

__all__ = [
    "available_providers",
    "batch_providers",
    "credential_env_names",
    "credentials_missing",
    "provider_class",
    "provider_options",
    "provider_transports",
    "sdk_installed",
]

_BUILTIN = {
    "mock": "agac.providers.mock:MockProvider",
    "openai": "agac.providers.openai:OpenAIProvider",
    "anthropic": "agac.providers.anthropic:AnthropicProvider",
    "gemini": "agac.providers.gemini:GeminiProvider",
    "groq": "agac.providers.groq:GroqProvider",
    "ollama": "agac.providers.ollama:OllamaProvider",
}


@lru_cache(maxsize=1)
def _targets() -> dict[str, str]:
    targets = dict(_BUILTIN)
    for ep in entry_points(group="agac.providers"):
        targets[ep.name] = ep.value
    return targets


def available_providers() -> list[str]:
    return sorted(_targets())


def provider_class(name: str) -> Any:
    """The adapter class registered as ``name``; ConfigError ``unknown_provider`` if none."""
    target = _targets().get(name)
    if target is None:
        known = ", ".join(available_providers())
        raise ConfigError(
            problems=[Problem("unknown_provider", f"unknown provider {name!r} (known: {known})")]
        )
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr)


def batch_providers() -> list[str]:
    """The registered providers whose class declares a batch API (``supports_batch``); a
    provider whose adapter cannot be loaded is left out."""
    names = []
    for name in available_providers():
        try:
            cls = provider_class(name)
        except (ImportError, ConfigError, AttributeError):
            continue
        if batch_support(cls) == "api":
            names.append(name)
    return names


def provider_transports(name: str) -> tuple[str, ...]:
    """The online transports provider ``name`` offers (``("lean", "sdk")`` for the
    built-in SDK adapters; empty when there is no choice, as for ``mock``)."""
    return tuple(getattr(provider_class(name), "transports", ()) or ())


def provider_options(name: str) -> tuple[Option, ...]:
    """The options provider ``name`` takes under ``providers: <name>:`` in agac.yml (its
    class's ``options``; none for a plugin that declares none)."""
    declared = getattr(provider_class(name), "options", ()) or ()
    return tuple(o for o in declared if isinstance(o, Option))


def sdk_installed(cls: Any) -> bool:
    mod = getattr(cls, "sdk_module", None)
    return mod is None or importlib.util.find_spec(mod) is not None


def credentials_missing(cls: Any, configured_key: str | None = None) -> list[str]:
    """The environment variables that could carry the key, when none of them is set."""
    names: tuple[str, ...] = tuple(getattr(cls, "credential_env", ()) or ())
    if not names or configured_key:
        return []
    if any(os.environ.get(n) for n in names):
        return []
    return list(names)


def credential_env_names() -> list[str]:
    """Every registered provider's credential variables (for redaction); a provider
    whose adapter cannot be loaded contributes none."""
    names: list[str] = []
    for name in available_providers():
        try:
            cls = provider_class(name)
        except (ImportError, ConfigError, AttributeError):
            continue
        names += [str(n) for n in getattr(cls, "credential_env", ()) or ()]
    return names
