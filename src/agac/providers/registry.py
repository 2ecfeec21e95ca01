"""Provider plugins: every provider, built-in or third-party, registers under the
entry point group ``agac.providers`` (name -> ``module:Class``).

Loading a provider class imports only its adapter module; the adapter imports its
SDK lazily when it is constructed, so the core install stays light and a missing SDK
is reported as ``provider_not_installed`` naming the extra.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from agac.errors import ConfigError, Problem
from agac.providers.options import Option
from agac.providers.spec import ProviderSpec

__all__ = [
    "available_providers",
    "batch_providers",
    "credential_env_names",
    "credentials_missing",
    "flex_providers",
    "provider_class",
    "provider_options",
    "provider_spec",
    "provider_transports",
    "sdk_installed",
]

_BUILTIN = {
    "mock": "agac.providers.mock:MockProvider",
    "openai": "agac.providers.openai:OpenAIProvider",
    "azure": "agac.providers.azure:AzureProvider",
    "anthropic": "agac.providers.anthropic:AnthropicProvider",
    "gemini": "agac.providers.gemini:GeminiProvider",
    "groq": "agac.providers.groq:GroqProvider",
    "ollama": "agac.providers.ollama:OllamaProvider",
    "deepseek": "agac.providers.deepseek:DeepSeekProvider",
    "mistral": "agac.providers.mistral:MistralProvider",
    "together": "agac.providers.together:TogetherProvider",
    "openrouter": "agac.providers.openrouter:OpenRouterProvider",
    "bedrock": "agac.providers.bedrock:BedrockProvider",
    "vertex": "agac.providers.vertex:VertexProvider",
    "vllm": "agac.providers.vllm:VllmProvider",
    "xai": "agac.providers.xai:XaiProvider",
    "fireworks": "agac.providers.fireworks:FireworksProvider",
}


@lru_cache(maxsize=1)
def _targets() -> dict[str, EntryPoint]:
    targets = {name: EntryPoint(name, value, "agac.providers") for name, value in _BUILTIN.items()}
    for ep in entry_points(group="agac.providers"):
        targets[ep.name] = ep
    return targets


def available_providers() -> list[str]:
    return sorted(_targets())


def provider_class(name: str) -> Any:
    """The adapter class registered as ``name``; ConfigError ``unknown_provider`` if none,
    ``invalid_provider`` when what is registered declares no spec of that name."""
    target = _targets().get(name)
    if target is None:
        known = ", ".join(available_providers())
        raise ConfigError(
            problems=[Problem("unknown_provider", f"unknown provider {name!r} (known: {known})")]
        )
    cls = target.load()
    _spec_of(name, target.value, cls)
    return cls


def provider_spec(name: str) -> ProviderSpec:
    """What provider ``name`` is and can do (its adapter class's ``spec``), read without
    loading its SDK."""
    target = _targets().get(name)
    cls = provider_class(name)
    return _spec_of(name, target.value if target else name, cls)


def _spec_of(name: str, where: str, cls: Any) -> ProviderSpec:
    """``cls.spec``, checked: a :class:`ProviderSpec` whose name is the registered one."""
    try:
        spec = cls.spec
    except AttributeError:
        spec = None
    if not isinstance(spec, ProviderSpec) or spec.name != name:
        raise ConfigError(
            problems=[
                Problem(
                    "invalid_provider",
                    f"provider {name!r} ({where}) declares no spec named {name!r}",
                    hint="give the adapter class a `spec = ProviderSpec(name=...)` "
                    "(agac.providers.spec; docs/providers.md, Provider specs)",
                )
            ]
        )
    return spec


def batch_providers() -> list[str]:
    """The registered providers whose spec declares a batch API; a provider whose adapter
    cannot be loaded is left out."""
    return [spec.name for spec in _loadable_specs() if spec.batch is not None]


def flex_providers() -> list[str]:
    """The registered providers whose spec declares a flex tier (loadable ones only)."""
    return [spec.name for spec in _loadable_specs() if spec.flex is not None]


def _loadable_specs() -> list[ProviderSpec]:
    specs = []
    for name in available_providers():
        try:
            specs.append(provider_spec(name))
        except (ImportError, ConfigError):
            continue
    return specs


def provider_transports(name: str) -> tuple[str, ...]:
    """The online transports provider ``name`` offers (``("lean", "sdk")`` for the
    built-in SDK adapters; empty when there is no choice, as for ``mock``)."""
    return provider_spec(name).transports


def provider_options(name: str) -> tuple[Option, ...]:
    """The options provider ``name`` takes under ``providers: <name>:`` in agac.yml."""
    return provider_spec(name).options


def sdk_installed(spec: ProviderSpec) -> bool:
    mod = spec.sdk_module
    return mod is None or importlib.util.find_spec(mod) is not None


def credentials_missing(spec: ProviderSpec, configured_key: str | None = None) -> list[str]:
    """The environment variables that could carry the key, when none of them is set."""
    names = spec.credential_env
    if not names or configured_key:
        return []
    if any(os.environ.get(n) for n in names):
        return []
    ambient = spec.ambient_credentials
    if ambient and _importable(ambient):
        return []
    return list(names)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def credential_env_names() -> list[str]:
    """Every registered provider's credential variables (for redaction); a provider
    whose adapter cannot be loaded contributes none."""
    names: list[str] = []
    for name in available_providers():
        try:
            names += provider_spec(name).credential_env
        except (ImportError, ConfigError):
            continue
    return names
