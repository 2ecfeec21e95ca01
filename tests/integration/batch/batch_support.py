"""Helpers of the batch-rule suite (this folder is on sys.path: tests/ has no packages)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agac import api
from agac.store.repository import Store
from agac.testing import write_project

#: One batch model per provider with a batch API.
MODELS: dict[str, str] = {
    "openai": "openai/gpt-4o-mini",
    "anthropic": "anthropic/claude-haiku-4-5",
    "gemini": "gemini/gemini-2.5-flash",
    "groq": "groq/llama-3.3-70b-versatile",
    "mistral": "mistral/mistral-small-latest",
    "together": "together/meta-llama/Llama-3.3-70B-Instruct-Turbo",
}
#: Every rule is proved for these two; Gemini, Groq, Mistral and Together cover the lifecycle, B2
#: unknown, B7.
MAIN = ("openai", "anthropic", "mistral", "together")
ALL = tuple(MODELS)

#: Fast retries: a failed attempt costs milliseconds.
RETRY = "{max_attempts: 2, backoff: {initial: 10ms, max: 20ms}}"

WORKFLOW = "bw"


def workflow(
    model: str,
    *,
    retry: str = RETRY,
    second: str | None = None,
    defaults: str = "",
    summarize: bool = True,
) -> str:
    """``classify`` (batch) → ``summarize`` (online), and optionally a third action
    ``tag`` (``second`` is its run_mode) reading both."""
    lines = [
        f"name: {WORKFLOW}",
        "input: {path: data/, id_field: id}",
        "defaults:",
        f"  model: {model}",
        "  run_mode: batch",
        "  max_tokens: 64",
        f"  retry: {retry}",
        *(f"  {line}" for line in defaults.splitlines() if line.strip()),
        "actions:",
        "  - name: classify",
        '    prompt: "Classify: {{ source.text }}"',
        (
            "    schema: {type: object, properties: {label: {type: string, enum: [a, b, c]}},"
            " required: [label], additionalProperties: false}"
        ),
    ]
    if summarize:
        lines += [
            "  - name: summarize",
            "    dependencies: [classify]",
            "    run_mode: online",
            '    prompt: "Summarize {{ source.text }} labelled {{ classify.label }}"',
        ]
    if second is not None:
        lines += [
            "  - name: tag",
            f"    dependencies: [{'summarize' if summarize else 'classify'}]",
            f"    run_mode: {second}",
            '    prompt: "Tag {{ source.text }} ({{ classify.label }})"',
        ]
    return "\n".join(lines) + "\n"


def records(prefix: str, n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i}", "text": f"item {prefix}{i} says {'yes' if i % 2 else 'no'}"}
        for i in range(n)
    ]


def make(
    root: Path,
    provider: str,
    files: Mapping[str, int] | None = None,
    *,
    agac_yml: str = "",
    **options: Any,
) -> dict[str, list[str]]:
    """Write the project; ``files`` maps a file stem to its record count (keys are
    ``<stem><i>``). Returns the record keys per file name."""
    files = files if files is not None else {"a": 3, "b": 2}
    data = {f"data/{stem}.jsonl": records(stem, n) for stem, n in files.items()}
    write_project(
        root, workflow(MODELS.get(provider, provider), **options), data=data, agac_yml=agac_yml
    )
    return {
        f"{stem}.jsonl": [r["id"] for r in rows]
        for stem, rows in ((s, records(s, n)) for s, n in files.items())
    }


def run(root: Path, **options: Any) -> Any:
    return api.run(WORKFLOW, root, **options)


def retry(root: Path, **options: Any) -> Any:
    return api.retry(WORKFLOW, root, **options)


def counts(result_or_summary: Any, action: str = "classify") -> dict[str, Any]:
    summary = getattr(result_or_summary, "summary", result_or_summary)
    return dict(summary["actions"][action])


def rows(
    root: Path, action: str = "classify", run_ref: str | None = None
) -> dict[str, dict[str, Any]]:
    """The action's outcome per record key in the run (default: the latest)."""
    return {r["key"]: r for r in api.export_rows(WORKFLOW, action, root, run_ref=run_ref)}


def ops(stats: dict[str, Any], provider: str) -> dict[str, int]:
    return dict(stats["requests"].get(provider, {}))


def creates(stats: dict[str, Any], provider: str) -> int:
    return ops(stats, provider).get("batch.create", 0)


@contextmanager
def store(root: Path) -> Iterator[Store]:
    """The project's store (its default SQLite file), closed afterwards."""
    s = Store(f"sqlite:///{root}/.agac/agac.db")
    try:
        yield s
    finally:
        s.close()


def batches(root: Path) -> list[Any]:
    """Every batch row of the workflow, oldest first."""
    with store(root) as s:
        return sorted(
            s.list_batches(WORKFLOW, tenants=None), key=lambda b: (b.created_at, b.file, b.part)
        )


def events(root: Path, run_ref: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
    return [e for e in api.events(run_ref or WORKFLOW, root) if kind is None or e["kind"] == kind]


def params(providers: tuple[str, ...]) -> Any:
    return pytest.mark.parametrize("provider", providers)
