"""Adapter options in ``agac.yml``: each provider declares its own (``options`` on its
class), every declared option is accepted and converted, a bad value is
``invalid_provider_option`` naming the key, an unknown key stays ``unknown_key`` with a
"did you mean", a plugin provider brings its own, and docs/providers.md lists exactly what
the adapters declare."""

from __future__ import annotations

import re
import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from agac.config import find_project
from agac.errors import ConfigError
from agac.providers import registry
from agac.providers.options import Option
from agac.providers.registry import available_providers, provider_options

DOCS = Path(__file__).parents[3] / "docs" / "providers.md"
BUILTIN = (
    "mock",
    "openai",
    "azure",
    "anthropic",
    "gemini",
    "groq",
    "ollama",
    "bedrock",
    "vertex",
    "vllm",
)

#: A valid value of each kind, and what the adapter receives for it.
GOOD: dict[str, tuple[Any, Any]] = {
    "number": (0.5, 0.5),
    "integer": (7, 7),
    "seconds": ("90s", 90.0),
    "text": ("  https://acme.openai.azure.com ", "https://acme.openai.azure.com"),
}


def _declared() -> list[tuple[str, Option]]:
    return [(name, option) for name in BUILTIN for option in provider_options(name)]


def _load(tmp_path: Path, body: str) -> Any:
    (tmp_path / "agac.yml").write_text(body, encoding="utf-8")
    return find_project(tmp_path).config


def _problems(tmp_path: Path, body: str) -> list[Any]:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, body)
    return info.value.problems


@pytest.mark.parametrize(
    ("provider", "option"), _declared(), ids=[f"{p}.{o.name}" for p, o in _declared()]
)
def test_every_declared_option_is_accepted_and_converted(
    tmp_path: Path, provider: str, option: Option
) -> None:
    given, expected = (
        (option.choices[-1], option.choices[-1]) if option.kind == "choice" else GOOD[option.kind]
    )
    config = _load(tmp_path, f"providers:\n  {provider}:\n    {option.name}: {given!r}\n")
    assert config.providers[provider].options == {option.name: expected}


@pytest.mark.parametrize(
    ("provider", "key", "value"),
    [
        ("openai", "timeout", "-3s"),
        ("openai", "timeout", "soon"),
        ("anthropic", "timeout", 0),
        ("gemini", "inline_max_bytes", 0),
        ("gemini", "inline_max_bytes", 1.5),
        ("gemini", "batch_input", "files"),
        ("openai", "structured_output", "tool"),
        ("anthropic", "structured_output", "json_mode"),
        ("groq", "find_batch_scan", "many"),
        ("anthropic", "find_batch_skew", -1),
        ("anthropic", "find_batch_skew", ".inf"),
        ("mock", "fail_rate", 2),
        ("mock", "latency_ms", True),
    ],
)
def test_a_bad_value_is_invalid_provider_option_naming_the_key(
    tmp_path: Path, provider: str, key: str, value: Any
) -> None:
    problems = _problems(tmp_path, f"providers:\n  {provider}:\n    {key}: {value}\n")
    assert [(p.code, p.line, p.path) for p in problems] == [
        ("invalid_provider_option", 3, f"providers.{provider}.{key}")
    ]
    assert f"providers.{provider}.{key} must be" in problems[0].message


def test_a_near_miss_choice_gets_a_did_you_mean(tmp_path: Path) -> None:
    [problem] = _problems(tmp_path, "providers:\n  gemini: {batch_input: fille}\n")
    assert problem.hint == "did you mean 'file'?"


def test_an_unknown_option_is_still_unknown_key_with_a_hint(tmp_path: Path) -> None:
    problems = _problems(
        tmp_path, "providers:\n  openai:\n    timeot: 30\n  gemini:\n    inline_max_byte: 10\n"
    )
    assert {(p.code, p.line, p.hint) for p in problems} == {
        ("unknown_key", 3, "did you mean 'timeout'?"),
        ("unknown_key", 5, "did you mean 'inline_max_bytes'?"),
    }


def test_an_option_of_another_provider_is_unknown_here(tmp_path: Path) -> None:
    [problem] = _problems(tmp_path, "providers:\n  openai: {batch_input: file}\n")
    assert problem.code == "unknown_key"


PLUGIN = """
from agac.providers.options import Option
from agac.providers.spec import ProviderSpec

class AcmeProvider:
    spec = ProviderSpec(
        name="acme",
        options=(Option("region", "choice", "where Acme runs", choices=("eu", "us")),
                 Option("warmth", "number", "how warm", maximum=2.0)),
    )
"""


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A third-party provider registered as ``acme`` (as its entry point would)."""
    (tmp_path / "acme_agac.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    acme = EntryPoint("acme", "acme_agac:AcmeProvider", "agac.providers")
    targets = {**registry._targets(), "acme": acme}
    monkeypatch.setattr(registry, "_targets", lambda: targets)
    yield
    sys.modules.pop("acme_agac", None)


@pytest.mark.usefixtures("acme")
def test_a_plugin_provider_brings_its_own_options(tmp_path: Path) -> None:
    config = _load(tmp_path, "providers:\n  acme: {region: eu, warmth: 1.5}\n")
    assert config.providers["acme"].options == {"region": "eu", "warmth": 1.5}
    problems = _problems(tmp_path, "providers:\n  acme: {region: mars, warmt: 1}\n")
    assert {(p.code, p.path) for p in problems} == {
        ("invalid_provider_option", "providers.acme.region"),
        ("unknown_key", "providers.acme.warmt"),
    }


def _documented() -> dict[str, set[str]]:
    """option -> providers, from the "Adapter options" table of docs/providers.md."""
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("### Adapter options", 1)[1].split("\n#", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = set(
                re.findall(r"\b(" + "|".join(BUILTIN) + r")\b", cells[1])
            )
    return rows


def test_docs_list_exactly_the_declared_options() -> None:
    declared: dict[str, set[str]] = {}
    for provider, option in _declared():
        declared.setdefault(option.name, set()).add(provider)
    assert _documented() == declared
    assert set(BUILTIN) <= set(available_providers())
