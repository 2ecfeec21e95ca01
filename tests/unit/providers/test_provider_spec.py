"""One typed spec per provider (docs/providers.md, Provider specs): every adapter declares a
frozen :class:`ProviderSpec`; validation and the engine ask it, never the adapter object
(no ``getattr``/``hasattr`` on a provider anywhere in ``src/``); an action's
``provider_options`` travel on the request and into its fingerprint, leaving every
existing request's fingerprint as it was."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from agac.engine.canonical import CanonicalForm
from agac.providers.base import Message, Request, stored_request
from agac.providers.registry import available_providers, provider_class, provider_spec
from agac.providers.spec import ProviderSpec

SRC = Path(__file__).resolve().parents[3] / "src" / "agac"

#: Modules of the provider seam: the contract, the registry, the factory, the spec, the
#: shared base, and where validation and the engine ask a provider what it can do. None
#: of them uses getattr/hasattr at all.
SEAM = {
    "providers/base.py",
    "providers/registry.py",
    "providers/factory.py",
    "providers/spec.py",
    "providers/adapter.py",
    "providers/options.py",
    "providers/contextcaches.py",
    "config/environment.py",
    "config/caching.py",
    "config/attachments.py",
    "config/project.py",
    "engine/actions.py",
    "engine/lifecycle/modes.py",
    "engine/lifecycle/assembly.py",
    "engine/workers/shards.py",
}
#: What the first argument of a getattr/hasattr on a provider looks like.
ON_A_PROVIDER = re.compile(r"provider|adapter|plugin|\bcls\b|\bspec\b|^type\(", re.IGNORECASE)


def _reflective_calls(tree: ast.AST) -> list[tuple[int, str, str | None]]:
    """``(line, source of the first argument, enclosing class)`` of each getattr/hasattr."""
    found: list[tuple[int, str, str | None]] = []

    def visit(node: ast.AST, owner: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inside = child.name if isinstance(child, ast.ClassDef) else owner
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Name)
                and child.func.id in ("getattr", "hasattr")
                and child.args
            ):
                found.append((child.lineno, ast.unparse(child.args[0]), owner))
            visit(child, inside)

    visit(tree, None)
    return found


def test_no_getattr_or_hasattr_on_a_provider_remains_in_src() -> None:
    offences = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for line, target, owner in _reflective_calls(ast.parse(path.read_text("utf-8"))):
            on_self = target in ("self", "type(self)") and (owner or "").endswith("Provider")
            if rel in SEAM or ON_A_PROVIDER.search(target) or on_self:
                offences.append(f"{rel}:{line}: getattr/hasattr({target}, …)")
    assert offences == []


def test_the_scan_finds_what_it_forbids() -> None:
    """The scan is not vacuous: each form it forbids is found in a sample."""
    sample = ast.parse(
        "class OpenAIProvider:\n"
        "    def f(self):\n"
        "        return getattr(self, 'x')\n"
        "getattr(provider, 'supports_batch')\n"
        "hasattr(provider_class(name), 'options')\n"
        "getattr(type(p), 'batch_max_bytes')\n"
    )
    calls = _reflective_calls(sample)
    assert [(line, owner) for line, _, owner in calls] == [
        (3, "OpenAIProvider"),
        (4, None),
        (5, None),
        (6, None),
    ]
    assert all(ON_A_PROVIDER.search(t) for _, t, _ in calls[1:])


@pytest.mark.parametrize("name", available_providers())
def test_each_builtin_adapter_declares_one_frozen_spec(name: str) -> None:
    spec = provider_spec(name)
    assert isinstance(spec, ProviderSpec) and spec.name == name
    assert provider_class(name).spec is spec
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    assert len({o.name for o in spec.options}) == len(spec.options)


def test_the_specs_say_what_each_provider_can_do() -> None:
    openai, anthropic, gemini = (provider_spec(n) for n in ("openai", "anthropic", "gemini"))
    assert openai.batch is not None and openai.batch.input == "file"
    assert anthropic.batch is not None and anthropic.batch.input == "inline"
    assert anthropic.batch.find == "window" and openai.batch.find == "key"
    assert gemini.batch is not None and gemini.batch.input == "inline_or_file"
    assert provider_spec("ollama").batch_support == "local"
    assert provider_spec("mock").batch_support == "none"
    assert "marker" in anthropic.cache_kinds and "routing_key" in openai.cache_kinds
    assert "explicit" in gemini.cache_kinds
    assert {o.name for o in openai.request_options} == {"reasoning_effort"}
    assert provider_spec("mock").transports == () and openai.transports == ("lean", "sdk")


def _request(**changes: object) -> Request:
    base = Request(
        provider="openai",
        model="gpt-4o-mini",
        messages=(Message("system", "be brief"), Message("user", "hello")),
        max_tokens=64,
        schema={"type": "object"},
        seed=1,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_a_request_without_options_keeps_its_fingerprint() -> None:
    """The canonical form of a request that sets no option is byte for byte what it was
    before options existed (this literal is that form), so stored answers still match."""
    assert _request().canonical() == (
        '{"max_tokens":64,"messages":[{"content":"be brief","role":"system"},'
        '{"content":"hello","role":"user"}],"model":"gpt-4o-mini","provider":"openai",'
        '"schema":{"type":"object"},"seed":1,"temperature":null}'
    )


def test_request_options_change_the_fingerprint_and_survive_storage() -> None:
    plain = _request()
    low = _request(options=(("reasoning_effort", "low"),))
    high = _request(options=(("reasoning_effort", "high"),))
    assert len({plain.fingerprint(), low.fingerprint(), high.fingerprint()}) == 3
    assert '"options":{"reasoning_effort":"low"}' in low.canonical()
    back = stored_request(low.canonical(), "c1")
    assert back.options == low.options and back.fingerprint() == low.fingerprint()


def test_the_tier_is_not_part_of_the_fingerprint() -> None:
    assert _request(tier="flex").fingerprint() == _request().fingerprint()


def test_an_actions_shared_canonical_form_takes_the_options_along() -> None:
    form = CanonicalForm("openai", "gpt-4o-mini", 64, None, {"type": "object"})
    plain = _request(schema=form.schema)
    low = _request(schema=form.schema, options=(("reasoning_effort", "low"),))
    assert form.of(plain) == plain.canonical()
    assert form.of(low) == low.canonical() != form.of(plain)
