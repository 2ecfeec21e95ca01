"""The shipped JSON Schema of workflow files (``agac schema``): in step with the loader,
and every shipped and documented example satisfies it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft7Validator

from agac.cli.main import cli
from agac.config import keys
from agac.config.schema import workflow_schema, workflow_schema_text

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = workflow_schema()
DEFS = SCHEMA["definitions"]
VALIDATOR = Draft7Validator(SCHEMA)


def _props(node: dict[str, Any]) -> set[str]:
    return set(node["properties"])


def _errors(doc: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(doc)
    ]


def test_the_schema_is_a_valid_draft7_schema() -> None:
    Draft7Validator.check_schema(SCHEMA)
    assert json.loads(workflow_schema_text()) == SCHEMA


def test_every_mapping_lists_exactly_the_keys_the_loader_accepts() -> None:
    backoff = next(
        b for b in DEFS["retry"]["properties"]["backoff"]["oneOf"] if b.get("type") == "object"
    )
    pairs = {
        "workflow": (_props(SCHEMA), keys.TOP_KEYS),
        "input": (_props(DEFS["input"]), keys.INPUT_KEYS),
        "budget": (_props(SCHEMA["properties"]["budget"]), keys.BUDGET_KEYS),
        "defaults": (_props(DEFS["defaults"]), keys.DEFAULTABLE_KEYS),
        "action": (_props(DEFS["action"]), keys.ACTION_KEYS),
        "context": (_props(DEFS["context"]), keys.CONTEXT_KEYS),
        "retry": (_props(DEFS["retry"]), keys.RETRY_KEYS),
        "retry.backoff": (_props(backoff), keys.BACKOFF_KEYS),
        "rate_limit": (_props(DEFS["rate_limit"]), keys.RATE_LIMIT_KEYS),
        "effect": (_props(DEFS["effect"]), keys.EFFECT_KEYS),
        "fan_out": (_props(DEFS["fan_out"]), keys.FAN_OUT_KEYS),
        "approval": (_props(DEFS["approval"]), keys.APPROVAL_KEYS),
    }
    for where, (in_schema, accepted) in pairs.items():
        assert in_schema == set(accepted), (where, in_schema ^ set(accepted))
    # Every mapping is closed, so an editor flags a key the loader would call unknown_key.
    for node in (
        SCHEMA,
        DEFS["input"],
        SCHEMA["properties"]["budget"],
        DEFS["defaults"],
        DEFS["action"],
        DEFS["context"],
        DEFS["retry"],
        backoff,
        DEFS["rate_limit"],
        DEFS["effect"],
        DEFS["fan_out"],
        DEFS["approval"],
    ):
        assert node["additionalProperties"] is False


def test_choices_match_the_loader() -> None:
    action = DEFS["action"]["properties"]
    assert set(action["kind"]["enum"]) == keys.KINDS
    assert tuple(DEFS["defaults"]["properties"]["gate"]["enum"]) == keys.GATES
    assert tuple(action["failure_policy"]["enum"]) == keys.FAILURE_POLICIES
    assert tuple(DEFS["approval"]["properties"]["on_reject"]["enum"]) == keys.ON_REJECT
    assert tuple(DEFS["approval"]["properties"]["on_expire"]["enum"]) == keys.ON_EXPIRE
    assert tuple(DEFS["run_mode"]["anyOf"][0]["enum"]) == keys.RUN_MODES


@pytest.mark.parametrize("key", sorted(keys.ACTION_KEYS))
def test_the_loader_knows_every_action_key_of_the_schema(wf, key: str) -> None:
    """Behaviour, not only the constants: a key the schema offers is never unknown_key."""
    checked = wf.check(f"input: {{path: d.jsonl}}\nactions:\n  - name: a\n    {key}: null\n")
    assert not [p for p in checked.problems if p.code == "unknown_key"], checked.codes()


def test_the_loader_and_the_schema_both_refuse_an_unknown_key(wf) -> None:
    text = "input: {path: d.jsonl}\nactions:\n  - name: a\n    model: mock/m\n    promt: x\n"
    assert "unknown_key" in wf.check(text).codes()
    assert any("promt" in e for e in _errors(yaml.safe_load(text)))


@pytest.mark.parametrize(
    "doc",
    [
        {"actions": [{"name": "a", "run_mode": "bulk"}]},
        {"actions": [{"name": "a", "timeout": "1.5h"}]},
        {"actions": [{"name": "a", "timeout": 0}]},
        {"actions": [{"name": "a", "kind": "tool"}]},  # a tool needs function
        {"actions": [{"name": "a", "fan_out": {"over": "x.items", "versions": 2}}]},
        {"actions": [{"name": "not an identifier"}]},
        {"actions": []},
        {"budget": {}, "actions": [{"name": "a"}]},
    ],
)
def test_the_schema_flags_what_validation_refuses(doc: dict[str, Any]) -> None:
    assert _errors(doc)


@pytest.mark.parametrize(
    "doc",
    [
        {"actions": [{"name": "a", "run_mode": "BATCH", "poll_interval": "5m", "timeout": 30}]},
        {
            "actions": [
                {"name": "a", "retry": {"backoff": "2s"}},
                {
                    "name": "b",
                    "retry": {
                        "max_attempts": 5,
                        "backoff": {"initial": "1s", "max": "1m", "multiplier": 2},
                    },
                },
            ]
        },
        {
            "actions": [
                {"name": "a", "fan_out": {"over": "x.items", "as": "it"}},
                {"name": "j", "kind": "join", "join": "a", "dependencies": "a"},
            ]
        },
    ],
)
def test_the_schema_accepts_valid_spellings(doc: dict[str, Any]) -> None:
    assert _errors(doc) == []


def _shipped_examples() -> list[Path]:
    found = sorted((ROOT / "src" / "agac" / "examples").rglob("workflows/*.yml"))
    assert len(found) >= 3
    return found


@pytest.mark.parametrize("path", _shipped_examples(), ids=lambda p: p.parent.parent.name)
def test_every_shipped_example_satisfies_the_schema(path: Path) -> None:
    assert _errors(yaml.safe_load(path.read_text(encoding="utf-8"))) == []


def _doc_blocks() -> list[tuple[str, Any]]:
    """Workflow examples in the docs: YAML blocks holding ``actions`` (a whole workflow or
    a fragment of one), and lists of actions. agac.yml examples are not workflows."""
    blocks = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for n, block in enumerate(re.findall(r"```ya?ml\n(.*?)```", text, re.DOTALL), 1):
            value = yaml.safe_load(block)
            if isinstance(value, dict) and "actions" in value:
                blocks.append((f"{path.relative_to(ROOT).as_posix()}#{n}", value))
            elif isinstance(value, list):
                blocks.append((f"{path.relative_to(ROOT).as_posix()}#{n}", {"actions": value}))
    return blocks


DOC_BLOCKS = _doc_blocks()


def test_the_docs_have_workflow_examples() -> None:
    assert len(DOC_BLOCKS) >= 8


@pytest.mark.parametrize(("where", "doc"), DOC_BLOCKS, ids=[w for w, _ in DOC_BLOCKS])
def test_every_workflow_example_in_the_docs_satisfies_the_schema(where: str, doc: Any) -> None:
    assert _errors(doc) == [], where


def test_agac_schema_prints_the_shipped_schema(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["schema"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == SCHEMA
    out = tmp_path / "s" / "workflow.schema.json"
    result = CliRunner().invoke(cli, ["schema", "--out", str(out)])
    assert result.exit_code == 0
    assert json.loads(out.read_text(encoding="utf-8")) == SCHEMA
