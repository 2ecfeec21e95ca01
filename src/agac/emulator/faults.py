"""Fault rules: what the emulator does wrong, when, and how often.

A rule is the JSON object of issue 3's control API::

    {"provider": "openai|azure|anthropic|gemini|groq|deepseek|mistral|together|openrouter|xai|fireworks|ollama|bedrock|vllm|*",
     "op": "chat|file.upload|file.download|batch.create|batch.get|batch.list|
            batch.results|batch.cancel|*",
     "match": {"custom_id": ..., "model": ..., "metadata": {...}, "service_tier": ...},
     "nth": N, "times": K, "fault": FAULT}

Matching: every key of ``match`` must equal the request's (``metadata`` is a subset
match; ``service_tier`` is the tier a live call asked for, ``flex`` or null for the
standard tier). A rule with ``match.custom_id`` only matches one item of a ``batch.create``, and
then affects that item alone (its answer, or an ``http`` fault that makes it *errored*).
Firing: ``nth`` (1-based) fires only on the Nth match since the rule was added; ``times``
caps how often it fires (with ``nth``, from the Nth match on); with neither it fires on
every match. One request takes at most one fault of each category (an HTTP outcome —
``http``, ``drop_connection``, ``rate_limit`` —, ``answer``, ``batch_end``, …): the first
due rule in order wins and later ones wait, so ``times: 1`` rules fire one after another.
Every match counts toward ``nth``, fired or not. :meth:`FaultBook.fire` folds what fires.

Next to ``http``, ``body`` sends that JSON as the error body, exactly (an error body as a
provider sends it: OpenAI's ``error.code`` as a string, an integer or null, Anthropic's
envelope with its ``request_id``, …), and ``headers`` adds response headers
(``request-id``, ``x-request-id``). A ``reply`` fault bends a successful answer
(:mod:`agac.emulator.anthropic` and the other provider modules say how).

``"after_create": true`` next to ``http`` or ``drop_connection`` on ``batch.create``
creates the batch first and then answers with the fault: the provider accepted the
batch but its answer was lost (B2 *unknown*), which recovery by ``find_batch``
must find.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .answers import ANSWER_FAULTS

__all__ = [
    "OPS",
    "PROVIDERS",
    "REPLY_KEYS",
    "FaultBook",
    "Fired",
    "Rule",
    "RuleError",
    "Target",
    "parse_rule",
]

PROVIDERS = frozenset(
    {
        "openai",
        "azure",
        "anthropic",
        "gemini",
        "groq",
        "deepseek",
        "mistral",
        "together",
        "openrouter",
        "xai",
        "fireworks",
        "ollama",
        "bedrock",
        "vertex",
        "vllm",
        "*",
    }
)
OPS = frozenset(
    {
        "chat",
        "file.upload",
        "file.download",
        "batch.create",
        "batch.get",
        "batch.list",
        "batch.results",
        "batch.cancel",
        "*",
        # Beyond issue 3's list: the other calls the emulator serves.
        "file.get",
        "file.list",
        "file.delete",
        "batch.delete",
        # Together's upload: the bytes PUT to the address it names, then the file processed.
        "file.put",
        "file.process",
        # xAI: requests added to an open batch; Fireworks: a dataset created.
        "batch.add",
        "dataset.create",
        "model.get",
        # Azure's Entra ID tokens (a managed identity's endpoint, .entra)
        "token",
        # Gemini's explicit context caches (.gemini_caches)
        "cache.create",
        "cache.get",
        "cache.list",
        "cache.delete",
        # Ollama's web search API (.ollama)
        "web_search",
    }
)
_KINDS = (
    "http",
    "drop_connection",
    "delay_ms",
    "rate_limit",
    "batch_end",
    "batch_drop_records",
    "batch_status",
    "batch_stuck_cancelling",
    "answer",
    "reply",
    "file_pending",
)
#: Keys of a ``reply`` fault (see :mod:`agac.emulator.replies`).
REPLY_KEYS = frozenset(
    {
        "stop",
        "stop_details",
        "refusal",
        "content",
        "blocks",
        "block_reason",
        "block_reason_message",
        "safety_category",
        "usage",
        "body",
        "filter",
    }
)
_BATCH_ENDS = frozenset({"failed", "expired", "cancelled"})

#: The window of a ``rate_limit`` rule, in emulator seconds: "a minute". Tests that run
#: the emulator in-process may shorten it (together with the client's window) to check
#: a rate limit without waiting minutes.
RATE_WINDOW_SECONDS = 60.0


class RuleError(ValueError):
    """A fault rule that cannot be accepted; the message says which part and why."""


@dataclass(frozen=True)
class Target:
    """What a request is about, for matching: its model, batch metadata, item id."""

    model: str | None = None
    metadata: dict[str, Any] | None = None
    custom_id: str | None = None
    tier: str | None = None
    """The tier a live call asked for (``flex``; None: the standard tier)."""


@dataclass
class Rule:
    """A parsed rule plus its counters (matches seen, times fired, rate window)."""

    provider: str
    op: str
    match: dict[str, Any]
    nth: int | None
    times: int | None
    fault: dict[str, Any]
    matched: int = 0
    fired: int = 0
    window: deque[float] = field(default_factory=deque)

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "op": self.op,
            "match": self.match,
            "nth": self.nth,
            "times": self.times,
            "fault": self.fault,
            "matched": self.matched,
            "fired": self.fired,
        }


@dataclass
class Fired:
    """The faults that fired for one request, folded into one view."""

    http: dict[str, Any] | None = None
    drop_connection: bool = False
    delay_ms: float = 0.0
    answer: str | None = None
    reply: dict[str, Any] | None = None
    batch_end: str | None = None
    answered: int = 0
    drop_records: int = 0
    batch_status: str | None = None
    stuck_cancelling: bool = False
    after_create: bool = False
    file_pending: int = 0
    """An uploaded file reads ``pending`` for this many ``file.get`` calls (Azure)."""
    #: set by :func:`~.handling.gate`: the outcome an ``after_create`` fault defers.
    lost: Exception | None = None

    def add(self, fault: dict[str, Any]) -> None:
        if "http" in fault and self.http is None:
            self.http = fault
        if "http" in fault or "drop_connection" in fault:
            self.after_create |= bool(fault.get("after_create"))
        self.drop_connection |= bool(fault.get("drop_connection"))
        self.delay_ms += float(fault.get("delay_ms", 0))
        self.answer = fault.get("answer", self.answer)
        self.reply = fault.get("reply", self.reply)
        if "batch_end" in fault:
            self.batch_end = fault["batch_end"]
            self.answered = int(fault.get("answered", 0))
        self.drop_records += int(fault.get("batch_drop_records", 0))
        self.batch_status = fault.get("batch_status", self.batch_status)
        self.stuck_cancelling |= bool(fault.get("batch_stuck_cancelling"))
        self.file_pending = int(fault.get("file_pending", self.file_pending))


def _kind(fault: dict[str, Any]) -> str:
    """The fault's category: one request takes at most one fault of each (the first rule
    in order wins), so rules with ``times`` queue up instead of firing together."""
    first = next(k for k in _KINDS if k in fault)
    return "outcome" if first in ("http", "drop_connection", "rate_limit") else first


def parse_rule(raw: Any) -> Rule:
    """Validate one rule; raise :class:`RuleError` naming the problem."""
    if not isinstance(raw, dict):
        raise RuleError("a rule must be a JSON object")
    unknown = set(raw) - {"provider", "op", "match", "nth", "times", "fault"}
    if unknown:
        raise RuleError(f"unknown rule keys: {sorted(unknown)}")
    provider = raw.get("provider", "*")
    op = raw.get("op", "*")
    if provider not in PROVIDERS:
        raise RuleError(f"provider must be one of {sorted(PROVIDERS)}, not {provider!r}")
    if op not in OPS:
        raise RuleError(f"op must be one of {sorted(OPS)}, not {op!r}")
    match = raw.get("match") or {}
    if not isinstance(match, dict) or set(match) - {
        "custom_id",
        "model",
        "metadata",
        "service_tier",
    }:
        raise RuleError("match takes only custom_id, model, metadata and service_tier")
    nth, times = raw.get("nth"), raw.get("times")
    for name, value in (("nth", nth), ("times", times)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise RuleError(f"{name} must be a positive integer")
    fault = raw.get("fault")
    if not isinstance(fault, dict) or not any(k in fault for k in _KINDS):
        raise RuleError(f"fault must be an object with one of {list(_KINDS)}")
    _check_fault(fault, provider, op)
    return Rule(provider, op, match, nth, times, fault)


def _check_fault(fault: dict[str, Any], provider: str, op: str) -> None:
    if "http" in fault:
        status = fault["http"]
        if not isinstance(status, int) or not 400 <= status <= 599:
            raise RuleError("http must be an error status between 400 and 599")
        headers = fault.get("headers")
        if headers is not None and not (
            isinstance(headers, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
        ):
            raise RuleError("headers must be an object of strings")
    if "rate_limit" in fault:
        rpm = (
            (fault["rate_limit"] or {}).get("rpm")
            if isinstance(fault["rate_limit"], dict)
            else None
        )
        if not isinstance(rpm, int) or rpm < 1:
            raise RuleError('rate_limit must be {"rpm": N} with N >= 1')
    if "answer" in fault and fault["answer"] not in ANSWER_FAULTS:
        raise RuleError(f"answer must be one of {sorted(ANSWER_FAULTS)}")
    if "answer" in fault and op not in ("chat", "batch.create", "*"):
        raise RuleError("answer faults apply to chat or batch.create")
    if "reply" in fault:
        reply = fault["reply"]
        if not isinstance(reply, dict) or set(reply) - REPLY_KEYS:
            raise RuleError(f"reply must be an object with keys from {sorted(REPLY_KEYS)}")
        if op not in ("chat", "batch.create", "*"):
            raise RuleError("reply faults apply to chat or batch.create")
    if "batch_end" in fault:
        if fault["batch_end"] not in _BATCH_ENDS:
            raise RuleError(f"batch_end must be one of {sorted(_BATCH_ENDS)}")
        if fault["batch_end"] == "failed" and provider in ("anthropic", "*"):
            # Anthropic's only terminal status is `ended`: a batch cannot "fail" there.
            raise RuleError(
                "batch_end: failed does not apply to anthropic (whose only "
                "terminal status is ended); name another provider"
            )
    if ("batch_end" in fault or "batch_drop_records" in fault) and op not in ("batch.create", "*"):
        raise RuleError("batch_end and batch_drop_records apply on batch.create")
    if ("batch_status" in fault or "batch_stuck_cancelling" in fault) and op not in (
        "batch.get",
        "batch.cancel",
        "*",
    ):
        raise RuleError("batch_status and batch_stuck_cancelling apply on batch.get")
    if fault.get("after_create") and (
        op != "batch.create" or not ("http" in fault or "drop_connection" in fault)
    ):
        raise RuleError("after_create applies to http or drop_connection on batch.create")
    if "delay_ms" in fault and not isinstance(fault["delay_ms"], (int, float)):
        raise RuleError("delay_ms must be a number")
    if "file_pending" in fault and (
        op not in ("file.upload", "*") or not isinstance(fault["file_pending"], int)
    ):
        raise RuleError("file_pending is a count of file.get calls, on file.upload")


class FaultBook:
    """The rules in force, in the order they were added."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []

    def add(self, raw_rules: Any) -> list[Rule]:
        """Append rules (all or none: one invalid rule rejects the whole list)."""
        if not isinstance(raw_rules, list):
            raise RuleError('the body must be {"rules": [RULE, ...]}')
        parsed = [parse_rule(raw) for raw in raw_rules]
        self.rules.extend(parsed)
        return parsed

    def clear(self) -> None:
        self.rules.clear()

    def fire(
        self, provider: str, op: str, target: Target, now: float, item_level: bool = False
    ) -> Fired:
        """Collect the faults firing for one request (or one batch item, ``item_level``).

        A firing ``rate_limit`` rule turns into a 429 with ``retry_after`` once more than
        ``rpm`` matching requests fell within the last minute (:data:`RATE_WINDOW_SECONDS`)
        of emulator time.
        """
        fired = Fired()
        taken: set[str] = set()
        for rule in self.rules:
            if not self._matches(rule, provider, op, target, item_level):
                continue
            rule.matched += 1
            kind = _kind(rule.fault)
            if kind in taken or not self._due(rule):
                continue
            fault = rule.fault
            if "rate_limit" in rule.fault:
                limited = self._rate_limited(rule, now)
                if limited is None:
                    continue
                fault = limited
            rule.fired += 1
            taken.add(kind)
            fired.add(fault)
        return fired

    @staticmethod
    def _matches(rule: Rule, provider: str, op: str, target: Target, item_level: bool) -> bool:
        if rule.provider not in ("*", provider) or rule.op not in ("*", op):
            return False
        match = rule.match
        if ("custom_id" in match) != item_level:
            return False
        if "custom_id" in match and match["custom_id"] != target.custom_id:
            return False
        if "model" in match and match["model"] != target.model:
            return False
        if "service_tier" in match and match["service_tier"] != target.tier:
            return False
        if "metadata" in match:
            have = target.metadata or {}
            want = match["metadata"] or {}
            if any(have.get(k) != v for k, v in want.items()):
                return False
        return True

    @staticmethod
    def _due(rule: Rule) -> bool:
        if rule.nth is not None:
            if rule.matched < rule.nth:
                return False
            if rule.times is None:
                return rule.matched == rule.nth
        return rule.times is None or rule.fired < rule.times

    @staticmethod
    def _rate_limited(rule: Rule, now: float) -> dict[str, Any] | None:
        rpm = int(rule.fault["rate_limit"]["rpm"])
        span = RATE_WINDOW_SECONDS
        while rule.window and rule.window[0] <= now - span:
            rule.window.popleft()
        if len(rule.window) < rpm:
            rule.window.append(now)
            return None
        wait = max(1, math.ceil(rule.window[0] + span - now))
        return {
            "http": 429,
            "retry_after": wait,
            "code": "rate_limit_exceeded",
            "rate_limit": {"rpm": rpm},
        }
