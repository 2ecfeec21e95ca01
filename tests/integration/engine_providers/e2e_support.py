"""Helpers of the end-to-end suite (this folder is on sys.path: tests/ has no packages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agac import api
from agac.testing import write_project

#: A model per provider, each in the bundled price table (Ollama's are free).
MODELS: dict[str, str] = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "groq": "llama-3.3-70b-versatile",
    "ollama": "llama3.2",
}
PROVIDERS = tuple(MODELS)

#: The classify action's schema, in the strict-compatible form every provider accepts.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["pos", "neg", "neutral"]},
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
    },
    "required": ["sentiment", "score"],
    "additionalProperties": False,
}

#: The online transport of the projects ``make_project`` writes (set per test by the
#: ``project`` fixture).
TRANSPORT = "lean"

#: Fast retries: a failed attempt costs milliseconds, not seconds.
RETRY = "{max_attempts: 3, backoff: {initial: 10ms, max: 50ms}}"


def workflow(
    model: str, *, retry: str = RETRY, concurrency: int = 4, extra: str = "", summarize: bool = True
) -> str:
    """A schema'd classify and (optionally) a free-text summarize that reads its output.

    ``extra`` is more YAML for ``defaults:`` (one ``key: value`` per line).
    """
    lines = [
        "name: triage",
        "input: {path: data/, id_field: id}",
        "defaults:",
        f"  model: {model}",
        f"  max_concurrency: {concurrency}",
        "  max_tokens: 256",
        "  timeout: 10s",
        f"  retry: {retry}",
        *(f"  {line}" for line in extra.splitlines() if line.strip()),
        "actions:",
        "  - name: classify",
        '    system: "You label product reviews."',
        '    prompt: "Classify this review: {{ source.text }}"',
        "    schema:",
        "      type: object",
        "      properties:",
        "        sentiment: {type: string, enum: [pos, neg, neutral]}",
        "        score: {type: integer, minimum: 0, maximum: 10}",
        "      required: [sentiment, score]",
        "      additionalProperties: false",
    ]
    if summarize:
        lines += [
            "  - name: summarize",
            "    dependencies: [classify]",
            (
                '    prompt: "In one line, summarize this {{ classify.sentiment }} review: '
                '{{ source.text }}"'
            ),
        ]
    return "\n".join(lines) + "\n"


def reviews(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"r{i:03d}", "text": f"Review {i}: the blender is {'great' if i % 2 else 'loud'}."}
        for i in range(n)
    ]


def project_yml(transport: str | None = None) -> str:
    """``agac.yml`` choosing ``transport`` (default: this test's) for every provider."""
    chosen = transport or TRANSPORT
    return "providers:\n" + "".join(f"  {name}: {{transport: {chosen}}}\n" for name in MODELS)


def make_project(root: Path, model: str, records: int = 4, **options: Any) -> Path:
    return write_project(
        root,
        workflow(model, **options),
        agac_yml=project_yml(),
        data={"data/reviews.jsonl": reviews(records)},
    )


def run(root: Path, **options: Any) -> Any:
    return api.run("triage", root, **options)


def chat_requests(stats: dict[str, Any], provider: str) -> int:
    """Live calls the emulator received from ``provider``, faulted ones included."""
    return int(stats["requests"].get(provider, {}).get("chat", 0))


def total_requests(stats: dict[str, Any]) -> int:
    return sum(n for ops in stats["requests"].values() for n in ops.values())


def sent_requests(monkeypatch: Any, provider: str) -> list[Any]:
    """Record every :class:`~agac.providers.base.Request` the engine hands ``provider``'s
    adapter, through ``complete`` or ``complete_encoded`` (the adapter still sends it)."""
    from agac.providers.registry import provider_class

    cls = provider_class(provider)
    original = cls.complete
    sent: list[Any] = []

    async def complete(self: Any, request: Any) -> Any:
        sent.append(request)
        return await original(self, request)

    monkeypatch.setattr(cls, "complete", complete)
    if hasattr(cls, "complete_encoded"):  # a live body encoded while the unit waited
        encoded_original = cls.complete_encoded

        async def complete_encoded(self: Any, request: Any, encoded: Any) -> Any:
            sent.append(request)
            return await encoded_original(self, request, encoded)

        monkeypatch.setattr(cls, "complete_encoded", complete_encoded)
    return sent


def fault(provider: str, spec: dict[str, Any], **rule: Any) -> dict[str, Any]:
    """A ``chat`` fault rule for ``provider`` (``rule`` adds ``nth``, ``times``, ``match``)."""
    return {"provider": provider, "op": "chat", "fault": spec, **rule}
