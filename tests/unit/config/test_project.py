from __future__ import annotations

from pathlib import Path

import pytest

from agac.config import find_project, store_url
from agac.config.project import Project, ProjectConfig
from agac.errors import ConfigError


def test_walks_up_to_agac_yml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "agac.yml").write_text("", encoding="utf-8")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    project = find_project()
    assert project.root == tmp_path.resolve()
    assert project.has_file and project.config == ProjectConfig()


def test_no_agac_yml_uses_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    project = find_project()
    assert project.root == tmp_path.resolve() and not project.has_file


def test_full_config(tmp_path: Path) -> None:
    (tmp_path / "agac.yml").write_text(
        "store: state/x.db\n"
        "providers:\n"
        "  mock: {latency_ms: 50, fail_rate: 0.1}\n"
        "  openai: {base_url: 'http://localhost:9/v1', api_key_env: MY_KEY,"
        " batch_submissions_per_minute: 10}\n"
        "prices:\n"
        "  openai/gpt-x: {input: 1, output: 2, cached_input: 0.5, batch_discount: 0.5}\n"
        "groups:\n"
        "  leads: [ann, bob]\n",
        encoding="utf-8",
    )
    config = find_project(tmp_path).config
    assert config.providers["mock"].options == {"latency_ms": 50.0, "fail_rate": 0.1}
    assert config.providers["openai"].api_key_env == "MY_KEY"
    assert config.providers["openai"].batch_submissions_per_minute == 10
    assert config.prices["openai/gpt-x"].cached_input == 0.5
    assert config.groups == {"leads": ("ann", "bob")}


def test_unknown_keys_are_located_with_hint(tmp_path: Path) -> None:
    (tmp_path / "agac.yml").write_text(
        "stor: memory\nproviders:\n  mock: {latency: 5}\n  openai:\n    base_ur: x\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        find_project(tmp_path)
    problems = {(p.code, p.line): p for p in info.value.problems}
    assert problems[("unknown_key", 1)].hint == "did you mean 'store'?"
    assert problems[("unknown_key", 1)].file == "agac.yml"
    assert problems[("unknown_key", 3)].hint == "did you mean 'latency_ms'?"
    assert problems[("unknown_key", 5)].hint == "did you mean 'base_url'?"


def test_bad_values_and_unknown_provider(tmp_path: Path) -> None:
    (tmp_path / "agac.yml").write_text(
        "providers:\n  mock: {fail_rate: 2}\n  opnai: {}\nprices:\n  gpt: {input: -1}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        find_project(tmp_path)
    codes = {(p.code, p.line) for p in info.value.problems}
    assert ("invalid_provider_option", 2) in codes
    assert ("unknown_provider", 3) in codes
    assert ("invalid_model", 5) in codes and ("invalid_value", 5) in codes
    assert ("missing_key", 5) in codes


def test_malformed_agac_yml(tmp_path: Path) -> None:
    (tmp_path / "agac.yml").write_text("store: [\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        find_project(tmp_path)
    assert info.value.problems[0].code == "yaml_syntax"


def _project(root: Path, store: str | None = None) -> Project:
    return Project(root, root / "agac.yml", ProjectConfig(store=store))


def test_store_url_default_and_relative(tmp_path: Path) -> None:
    assert store_url(_project(tmp_path), {}) == f"sqlite:///{tmp_path}/.agac/agac.db"
    assert store_url(_project(tmp_path, "sqlite:///s/a.db"), {}) == f"sqlite:///{tmp_path}/s/a.db"
    assert store_url(_project(tmp_path, "s/b.db"), {}) == f"sqlite:///{tmp_path}/s/b.db"
    assert store_url(_project(tmp_path, "sqlite:////abs/c.db"), {}) == "sqlite:////abs/c.db"
    assert store_url(_project(tmp_path, "memory"), {}) == "memory"
    pg = "postgresql://u@h:5432/db"
    assert store_url(_project(tmp_path, pg), {}) == pg


def test_agac_store_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGAC_STORE", "memory")
    assert store_url(_project(tmp_path, "sqlite:///x.db")) == "memory"
    monkeypatch.setenv("AGAC_STORE", "sqlite:///env.db")
    assert store_url(_project(tmp_path, "memory")) == f"sqlite:///{tmp_path}/env.db"


def test_p1_transport_per_provider(tmp_path: Path) -> None:
    (tmp_path / "agac.yml").write_text(
        "providers:\n  openai: {transport: sdk}\n  anthropic: {transport: lean}\n  groq: {}\n",
        encoding="utf-8",
    )
    providers = find_project(tmp_path).config.providers
    assert providers["openai"].transport == "sdk"
    assert providers["anthropic"].transport == "lean"
    assert providers["groq"].transport == "lean"  # the default


def test_p1_bad_transport_is_located_with_the_choices(tmp_path: Path) -> None:
    (tmp_path / "agac.yml").write_text(
        "providers:\n  openai:\n    transport: sdkk\n  mock:\n    transport: sdk\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        find_project(tmp_path)
    problems = {(p.code, p.line): p for p in info.value.problems}
    bad = problems[("invalid_value", 3)]
    assert "lean or sdk" in bad.message and bad.file == "agac.yml"
    assert bad.hint is not None and bad.hint.startswith("did you mean 'sdk'?")
    # The mock provider has no transport to choose: the key is unknown there.
    assert ("unknown_key", 5) in problems


def test_i35_15_a_store_path_with_a_tilde_is_in_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    root = tmp_path / "project"
    for written in ("~/stores/a.db", "sqlite:///~/stores/a.db"):
        assert store_url(_project(root, written), {}) == f"sqlite:///{home}/stores/a.db"
    assert store_url(_project(root, "dir://~/points"), {}) == f"dir://{home}/points"
    assert store_url(_project(root, "x.db"), {"AGAC_STORE": "~/env.db"}) == (
        f"sqlite:///{home}/env.db"
    )


def test_i35_15_a_store_path_naming_a_home_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        store_url(_project(tmp_path, "~no-such-user-i35/a.db"), {})
    (problem,) = info.value.problems
    assert problem.code == "invalid_store" and "~no-such-user-i35/a.db" in problem.message
    assert not (tmp_path / "~no-such-user-i35").exists()
