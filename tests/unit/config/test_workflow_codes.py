"""Every validation code, with a real file, asserting code, file and line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agac.config import find_project, load_workflow, validate_workflow, workflow_problems_json
from agac.errors import ConfigError
from agac.providers.spec import BatchSpec, ProviderSpec

BASE = """
input: {path: data.jsonl}
actions:
"""


def test_valid_workflow_has_no_problems(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: classify
    model: mock/m
    prompt: "Classify {{ source.text }}"
"""
    )
    assert checked.problems == []
    assert checked.workflow is not None and checked.workflow.name == "wf"


def test_yaml_syntax(wf) -> None:
    checked = wf.check("input: {path: x}\nactions:\n  - name: a\n    prompt: [unclosed\n")
    p = checked.one("yaml_syntax")
    assert p.file == "wf.yml" and p.line >= 4
    assert checked.workflow is None


def test_duplicate_yaml_key(wf) -> None:
    checked = wf.check(BASE + "  - name: a\n    model: mock/m\n    prompt: x\n    prompt: y\n")
    assert checked.one("yaml_syntax").line == checked.line_of("prompt: y")


def test_unknown_key_with_hint(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: a
    model: mock/m
    prompt: x
    max_token: 5
"""
    )
    p = checked.one("unknown_key")
    assert (p.file, p.line) == ("wf.yml", checked.line_of("max_token"))
    assert p.hint == "did you mean 'max_tokens'?"
    assert p.path == "actions[0].max_token"


def test_unknown_top_level_and_defaults_keys(wf) -> None:
    checked = wf.check("""
inputs: {path: x}
defaults:
  modle: mock/m
  name: nope
actions:
  - {name: a, model: mock/m, prompt: x}
""")
    lines = {(p.code, p.line, p.hint) for p in checked.problems}
    assert ("unknown_key", 1, "did you mean 'input'?") in lines
    assert ("unknown_key", 3, "did you mean 'model'?") in lines
    assert any(p.code == "unknown_key" and p.line == 4 for p in checked.problems)
    assert ("missing_key", 1, "input: {path: data/records.jsonl}") in lines


def test_missing_keys(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: a
    model: mock/m
  - name: t
    kind: tool
"""
    )
    missing = [p for p in checked.problems if p.code == "missing_key"]
    assert {p.line for p in missing} == {checked.line_of("name: a"), checked.line_of("name: t")}


def test_invalid_values(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: a
    model: mock/m
    prompt: x
    max_tokens: 0
    temperature: hot
    max_concurrency: -1
    cache: maybe
    rate_limit: {rpm: 0}
"""
    )
    lines = {p.line for p in checked.problems if p.code == "invalid_value"}
    for key in ("max_tokens", "temperature", "max_concurrency", "rpm"):
        assert checked.line_of(key) in lines, key
    # an llm action's cache is its prompt caching mode (off, auto, on)
    assert checked.line_of("cache") in {
        p.line for p in checked.problems if p.code == "invalid_cache"
    }


def test_unsupported_run_mode(wf) -> None:
    checked = wf.check(BASE + "  - {name: a, model: mock/m, prompt: x, run_mode: offline}\n")
    assert checked.one("unsupported_run_mode").line == 3


def test_run_mode_is_case_insensitive(wf) -> None:
    checked = wf.check(BASE + "  - {name: a, model: mock/m, prompt: x, run_mode: ONLINE}\n")
    assert checked.problems == []
    assert checked.workflow is not None and checked.workflow.actions[0].run_mode == "online"


def test_tuning_without_batch(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: a
    model: mock/m
    prompt: x
    run_mode: online
    poll_interval: 5m
"""
    )
    assert checked.one("tuning_without_batch").line == checked.line_of("poll_interval")


def test_not_an_llm_action(wf, in_tmp_project: Path) -> None:
    (in_tmp_project / "tools.py").write_text("def f(inputs, ctx):\n    return 1\n")
    checked = wf.check(
        BASE
        + """
  - name: t
    kind: tool
    function: tools:f
    run_mode: online
    batch_deadline: 2h
"""
    )
    lines = {p.line for p in checked.problems if p.code == "not_an_llm_action"}
    assert lines == {checked.line_of("run_mode"), checked.line_of("batch_deadline")}


def test_invalid_poll_interval_and_batch_deadline(wf) -> None:
    checked = wf.check("""
input: {path: x}
defaults:
  run_mode: batch
actions:
  - name: a
    model: mock/m
    prompt: x
    poll_interval: 0s
    batch_deadline: soon
""")
    assert checked.one("invalid_poll_interval").line == checked.line_of("poll_interval")
    assert checked.one("invalid_batch_deadline").line == checked.line_of("batch_deadline")


def test_invalid_duration(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: a
    model: mock/m
    prompt: x
    timeout: 1.5h
    retry: {max_attempts: 2, backoff: {initial: fast}}
"""
    )
    lines = {p.line for p in checked.problems if p.code == "invalid_duration"}
    assert lines == {checked.line_of("timeout"), checked.line_of("retry")}


def test_graph_errors(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - {name: a, model: mock/m, prompt: x, dependencies: [clasify]}
  - {name: a, model: mock/m, prompt: x}
"""
    )
    p = checked.one("unknown_dependency")
    assert p.line == 4 and p.path == "actions[0].dependencies[0]"
    assert checked.one("duplicate_action").line == 5


def test_dependency_cycle(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - {name: a, model: mock/m, prompt: x, dependencies: [b]}
  - {name: b, model: mock/m, prompt: x, dependencies: [a]}
  - {name: c, model: mock/m, prompt: x, dependencies: [c]}
"""
    )
    cycles = sorted((p.line, p.message) for p in checked.problems if p.code == "dependency_cycle")
    assert cycles == [(4, "dependency cycle: a -> b -> a"), (6, "dependency cycle: c -> c")]


def test_undefined_variable(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: classify
    model: mock/m
    prompt: "{{ source.text }}"
  - name: other
    model: mock/m
    prompt: "{{ source.text }}"
  - name: reply
    dependencies: [classify]
    model: mock/m
    system: "{{ other.text }}"
    prompt: "{{ classify.text }} {{ sourc.x }}"
"""
    )
    problems = [p for p in checked.problems if p.code == "undefined_variable"]
    assert {p.line for p in problems} == {checked.line_of("system:"), checked.line_of("sourc.x")}
    by_line = {p.line: p for p in problems}
    assert by_line[checked.line_of("system:")].hint == "add 'other' to its dependencies"
    assert by_line[checked.line_of("sourc.x")].hint == "did you mean 'source'?"


def test_undefined_variable_with_observe_and_drop(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: classify
    model: mock/m
    prompt: "{{ source.text }}"
  - name: reply
    dependencies: [classify]
    model: mock/m
    context: {observe: [source.text, classify.*], drop: [source.text.secret]}
    prompt: "{{ source.text }} {{ classify.label }} {{ source.email }}"
    when: "source.text.secret == 1"
"""
    )
    problems = [p for p in checked.problems if p.code == "undefined_variable"]
    assert [(p.line, p.hint) for p in sorted(problems, key=lambda p: p.line)] == [
        (checked.line_of('prompt: "{{ source.text }} {{'), "add it to context.observe"),
        (checked.line_of("when:"), "remove it from context.drop"),
    ]


def test_undefined_variable_in_observe(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: a
    model: mock/m
    context: {observe: [nothing.x]}
    prompt: hi
"""
    )
    assert checked.one("undefined_variable").line == checked.line_of("observe")


def test_invalid_template_line_inside_block(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: a
    model: mock/m
    prompt: |
      Line one {{ source.text }}
      Line two {% if %}
    when: "source.x =="
"""
    )
    found = sorted(p.line for p in checked.problems if p.code == "invalid_template")
    assert found == [checked.line_of("Line two"), checked.line_of("when:")]


def test_invalid_schema(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: a
    model: mock/m
    prompt: x
    schema: {type: objekt}
"""
    )
    assert checked.one("invalid_schema").line == checked.line_of("schema")


def test_unknown_provider_and_invalid_model(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - {name: a, model: mokc/m, prompt: x}
  - {name: b, model: gpt-4o, prompt: x}
"""
    )
    p = checked.one("unknown_provider")
    assert p.line == 4 and p.hint == "did you mean 'mock'?"
    assert checked.one("invalid_model").line == 5


class _NoSdk:
    spec = ProviderSpec(
        "fancy",
        extra="fancy",
        sdk_module="agac_test_no_such_sdk",
        credential_env=("FANCY_API_KEY",),
    )


class _Keyed:
    spec = ProviderSpec("keyed", extra="keyed", credential_env=("KEYED_API_KEY",))


@pytest.fixture
def fake_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    from agac.providers import registry

    real = registry.provider_class
    fakes = {"fancy": _NoSdk, "keyed": _Keyed}
    monkeypatch.setattr(
        registry, "provider_class", lambda name: fakes[name] if name in fakes else real(name)
    )


def test_provider_not_installed(wf, fake_providers: None) -> None:
    checked = wf.check(BASE + "  - {name: a, model: fancy/m, prompt: x}\n")
    p = checked.one("provider_not_installed")
    assert p.line == 3 and p.hint is not None
    assert p.hint.startswith("pip install -e '.[fancy]' in your clone of agac")


def test_missing_credentials(wf, fake_providers: None, monkeypatch: pytest.MonkeyPatch) -> None:
    text = BASE + "  - {name: a, model: keyed/m, prompt: x}\n"
    p = wf.check(text).one("missing_credentials")
    assert p.line == 3 and "KEYED_API_KEY" in (p.hint or "")
    assert "agac emulator env" in (p.hint or "")
    monkeypatch.setenv("KEYED_API_KEY", "k")
    assert wf.check(text).problems == []


class _Batched:
    spec = ProviderSpec("batched", extra="batched", batch=BatchSpec())


class _Plain:
    """A plugin that declares no batch API (nor a local batch)."""

    spec = ProviderSpec("plain", extra="plain")


@pytest.fixture
def plugin_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    from agac.providers import registry

    real = registry.provider_class
    fakes = {"batched": _Batched, "plain": _Plain}
    monkeypatch.setattr(
        registry, "provider_class", lambda name: fakes[name] if name in fakes else real(name)
    )


def test_batch_unsupported_names_the_action_and_the_provider(wf, plugin_providers: None) -> None:
    checked = wf.check(
        BASE
        + """
  - {name: a, model: mock/m, prompt: x, run_mode: batch}
  - {name: b, model: plain/m, prompt: x, run_mode: batch}
  - {name: c, model: batched/m, prompt: x, run_mode: batch}
  - {name: d, model: ollama/m, prompt: x, run_mode: batch}
  - {name: e, model: mock/m, prompt: x}
"""
    )
    found = [p for p in checked.problems if p.code == "batch_unsupported"]
    assert [(p.line, p.severity) for p in found] == [(4, "error"), (5, "error")]
    assert "action 'a'" in found[0].message and "provider 'mock'" in found[0].message
    assert "action 'b'" in found[1].message and "provider 'plain'" in found[1].message
    assert "run_mode: online" in (found[0].hint or "") and "openai" in (found[0].hint or "")
    assert checked.workflow is None
    assert [p.code for p in checked.problems] == ["batch_unsupported"] * 2


def test_batch_unsupported_from_defaults_and_from_the_run(wf) -> None:
    defaults = wf.check("""
input: {path: x}
defaults: {model: mock/m, run_mode: batch}
actions:
  - {name: a, prompt: x}
  - {name: b, prompt: x, run_mode: online}
""")
    p = defaults.one("batch_unsupported")
    assert p.line == 2 and "action 'a'" in p.message and "run_mode: batch" in p.message
    run = wf.check(BASE + "  - {name: a, model: mock/m, prompt: x}\n", run_mode="batch")
    p = run.one("batch_unsupported")
    assert p.line == 3 and "--run-mode batch" in p.message
    assert wf.check(BASE + "  - {name: a, model: mock/m, prompt: x}\n").problems == []


def test_batch_support_is_read_from_the_class_without_loading_an_sdk(in_tmp_project: Path) -> None:
    (in_tmp_project / "wf.yml").write_text(
        BASE.lstrip()
        + """\
  - {name: a, model: openai/gpt-4o-mini, prompt: x, run_mode: batch}
  - {name: b, model: mock/m, prompt: x, run_mode: batch}
""",
        encoding="utf-8",
    )
    script = (
        "import sys\n"
        "from agac.config import find_project, validate_workflow\n"
        "_, problems = validate_workflow('wf.yml', find_project(), check_credentials=False)\n"
        "print(sorted(p.code for p in problems))\n"
        "print(sorted(m for m in ('openai', 'anthropic', 'google.genai', 'groq', 'ollama')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=in_tmp_project,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert out == ["['batch_unsupported']", "[]"]


def test_invalid_function(wf, in_tmp_project: Path) -> None:
    (in_tmp_project / "tools").mkdir()
    (in_tmp_project / "tools" / "__init__.py").write_text("")
    (in_tmp_project / "tools" / "mail.py").write_text("def send(inputs, ctx):\n    return 1\n")
    checked = wf.check(
        BASE
        + """
  - {name: ok, kind: tool, function: "tools.mail:send"}
  - {name: gone, kind: tool, function: "tools.mail:nope"}
  - {name: bad, kind: tool, function: "not a spec"}
  - {name: missing, kind: tool, function: "nowhere_xyz:f"}
"""
    )
    found = sorted(p.line for p in checked.problems if p.code == "invalid_function")
    assert found == [5, 6, 7]


def test_not_durable(wf, in_tmp_project: Path) -> None:
    (in_tmp_project / "agac.yml").write_text("store: memory\n")
    checked = wf.check(BASE + "  - {name: a, model: mock/m, prompt: x, run_mode: batch}\n")
    assert checked.one("not_durable").line == 3


def test_r4_deadline_is_a_positive_duration(wf) -> None:
    action = "  - {name: a, model: mock/m, prompt: x}\n"
    assert wf.check("deadline: 48h\n" + BASE + action).workflow.deadline == 48 * 3600
    checked = wf.check("deadline: soon\n" + BASE + action)
    assert checked.one("invalid_deadline").line == 1


def test_r5_budget_is_validated(wf) -> None:
    checked = wf.check(
        "budget: {usd: -1, tokens: 0, euros: 3}\n"
        + BASE
        + "  - {name: a, model: mock/m, prompt: x}\n"
    )
    codes = sorted(p.code for p in checked.problems if p.severity == "error")
    assert codes == ["invalid_value", "invalid_value", "unknown_key"]


def test_r5_unpriced_model_is_an_error_with_a_budget(wf) -> None:
    from agac.providers.pricing import PriceTable

    known = PriceTable().known
    snippet = "  - {name: a, model: openai/no-such-model, prompt: x}\n"
    warned = wf.check(BASE + snippet, price_lookup=known)
    assert [p.severity for p in warned.problems if p.code == "unpriced_model"] == ["warning"]
    refused = wf.check("budget: {usd: 5}\n" + BASE + snippet, price_lookup=known)
    assert [p.severity for p in refused.problems if p.code == "unpriced_model"] == ["error"]


def test_batch_from_the_action_defaults_or_the_run(wf) -> None:
    text = """
input: {path: x}
defaults:
  run_mode: batch
actions:
  - {name: a, model: ollama/m, prompt: x}
  - {name: b, model: ollama/m, prompt: x, run_mode: online}
"""
    checked = wf.check(text)
    assert checked.problems == []
    assert checked.workflow is not None
    assert [a.run_mode for a in checked.workflow.actions] == ["batch", "online"]
    text2 = BASE + "  - {name: a, model: ollama/m, prompt: x}\n"
    checked = wf.check(text2, run_mode="batch")
    assert checked.problems == [] and checked.workflow is not None
    assert checked.workflow.actions[0].run_mode == "batch"
    checked = wf.check(BASE + "  - {name: a, model: ollama/m, prompt: x, run_mode: Batch}\n")
    assert checked.workflow is not None and checked.workflow.actions[0].run_mode == "batch"


def test_unsupported_run_mode_from_the_run(wf) -> None:
    checked = wf.check(BASE + "  - {name: a, model: mock/m, prompt: x}\n", run_mode="offline")
    p = checked.one("unsupported_run_mode")
    assert p.line == 3 and "--run-mode" in p.message


def test_tuning_without_batch_from_defaults_is_silent(wf) -> None:
    checked = wf.check("""
input: {path: x}
defaults: {model: mock/m, poll_interval: 5m, batch_deadline: 2h}
actions:
  - {name: a, prompt: x}
""")
    assert checked.problems == []
    assert checked.workflow is not None and checked.workflow.actions[0].poll_interval is None


def test_not_an_llm_action_for_run_mode_batch(wf, in_tmp_project: Path) -> None:
    (in_tmp_project / "tools.py").write_text("def f(inputs, ctx):\n    return 1\n")
    checked = wf.check(BASE + "  - {name: t, kind: tool, function: tools:f, run_mode: batch}\n")
    assert checked.one("not_an_llm_action").line == 3


def test_not_durable_from_the_environment_and_the_run(
    wf, in_tmp_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = BASE + "  - {name: a, model: mock/m, prompt: x}\n"
    monkeypatch.setenv("AGAC_STORE", "memory")
    checked = wf.check(text, run_mode="batch")
    assert checked.one("not_durable").line == 3
    assert wf.check(text).problems == []  # online on a memory store is fine


def test_guard_reads_missing_field_is_a_warning(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: classify
    model: mock/m
    prompt: x
    schema: {type: object, properties: {sentiment: {enum: [pos, neg]}}, required: [sentiment]}
  - name: summary
    model: mock/m
    prompt: x
  - name: reply
    dependencies: [classify, summary]
    model: mock/m
    prompt: x
    when: "classify.sentimnet == 'neg' or summary.text or summary.title"
"""
    )
    warnings = [p for p in checked.problems if p.code == "guard_reads_missing_field"]
    assert len(warnings) == 2 and {p.severity for p in warnings} == {"warning"}
    assert {p.line for p in warnings} == {checked.line_of("when:")}
    assert checked.workflow is not None  # warnings do not stop a workflow


def test_unpriced_model_warning_uses_lookup(wf) -> None:
    text = (
        BASE + "  - {name: a, model: mock/m, prompt: x}\n  - {name: b, model: openai/zz,"
        " prompt: x}\n"
    )
    checked = wf.check(text, price_lookup=lambda model: False, check_credentials=False)
    p = checked.one("unpriced_model")
    assert p.severity == "warning" and p.line == 4
    assert not wf.check(text, price_lookup=lambda m: True, check_credentials=False).problems


def test_all_errors_reported_at_once_and_json(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: a
    model: mock/m
    prompt: "{{ nope }}"
    max_tokenz: 3
    run_mode: sometimes
    dependencies: [ghost]
"""
    )
    assert set(checked.codes()) == {
        "undefined_variable",
        "unknown_key",
        "unsupported_run_mode",
        "unknown_dependency",
    }
    assert all(p.file == "wf.yml" and p.line > 0 for p in checked.problems)
    out = workflow_problems_json(checked.problems)
    assert out["ok"] is False and len(out["errors"]) == len(checked.problems)
    assert {"code", "message", "file", "line", "severity", "hint", "path"} <= set(out["errors"][0])


def test_load_workflow_raises_with_every_problem(wf, in_tmp_project: Path) -> None:
    path = wf.write(BASE + "  - {name: a, model: mock/m, promt: x, max_tokens: -1}\n")
    with pytest.raises(ConfigError) as info:
        load_workflow(path, find_project(in_tmp_project))
    assert {p.code for p in info.value.problems} == {"unknown_key", "invalid_value", "missing_key"}
    assert info.value.exit_code == 2


def test_workflow_found_by_name(wf, in_tmp_project: Path) -> None:
    wf.write(
        "name: triage\n" + BASE + "  - {name: a, model: mock/m, prompt: x}\n", "workflows/one.yml"
    )
    wf.write(BASE + "  - {name: a, model: mock/m, prompt: x}\n", "workflows/two.yml")
    project = find_project(in_tmp_project)
    assert load_workflow("triage", project).path.name == "one.yml"
    assert load_workflow("two", project).name == "two"
    assert load_workflow("workflows/one.yml", project).name == "triage"
    workflow, problems = validate_workflow("nope", project)
    assert workflow is None and problems[0].code == "workflow_not_found"
