"""The keys a workflow file may hold, and which features this version has.

Keys of features that do not exist yet are known here so that they fail validation
with ``not_available_yet`` instead of ``unknown_key`` — never accepted and ignored.
Enabling a feature later means moving its key out of a ``FUTURE_*`` set.
"""

from __future__ import annotations

import keyword

__all__ = [
    "ACTION_KEYS",
    "APPROVAL_KEYS",
    "ATTACHMENT_POSITIONS",
    "AVAILABLE_RUN_MODES",
    "BATCH_TUNING_KEYS",
    "BUDGET_KEYS",
    "CACHE_MODES",
    "CACHE_TTLS",
    "CHECK_KEYS",
    "CHECK_ON_FAIL",
    "DEFAULTABLE_KEYS",
    "EFFECT_KEYS",
    "FAILURE_POLICIES",
    "FAN_OUT_KEYS",
    "FOLLOW_UP_RUN_MODES",
    "FUNCTION_TOOL_KEYS",
    "FUTURE_ACTION_KEYS",
    "FUTURE_KINDS",
    "FUTURE_TOP_KEYS",
    "GATES",
    "HYBRID_KEYS",
    "JOIN_NAMES",
    "JUDGE_KEYS",
    "KINDS",
    "LLM_ONLY_KEYS",
    "NOT_IN_DEFAULTS",
    "ON_EXPIRE",
    "ON_REJECT",
    "RESERVED_NAMES",
    "REUSE_SCOPES",
    "RUN_MODES",
    "TOOL_KEYS",
    "TOP_KEYS",
]

TOP_KEYS = frozenset(
    {
        "name",
        "description",
        "input",
        "defaults",
        "actions",
        "partial_ok",
        "budget",
        "deadline",
        "pilot",
    }
)
FUTURE_TOP_KEYS: frozenset[str] = frozenset()
BUDGET_KEYS = frozenset({"usd", "tokens"})
INPUT_KEYS = frozenset({"path", "id_field", "format"})

ACTION_KEYS = frozenset(
    {
        "name",
        "kind",
        "dependencies",
        "model",
        "system",
        "prompt",
        "schema",
        "context",
        "when",
        "retry",
        "max_tokens",
        "temperature",
        "timeout",
        "max_concurrency",
        "max_prompt_chars",
        "rate_limit",
        "run_mode",
        "poll_interval",
        "batch_deadline",
        "flex_fallback_after",
        "function",
        "cache",
        "reuse",
        "effect",
        "auto_batch_min_records",
        "wait_for_cheaper",
        "fan_out",
        "join",
        "gate",
        "failure_policy",
        "approval",
        "attachments",
        "attachments_position",
        "attachment_folders",
        "cache_ttl",
        "context_prefix",
        "hybrid",
        "provider_options",
        "checks",
        "tools",
        "max_turns",
        "max_tool_calls",
        "variants",
        "primary",
    }
)
FUTURE_ACTION_KEYS: frozenset[str] = frozenset()
NOT_IN_DEFAULTS = frozenset(
    {
        "name",
        "kind",
        "dependencies",
        "function",
        "reuse",
        "fan_out",
        "join",
        "effect",
        "approval",
        "tools",
        "variants",
        "primary",
    }
)
REUSE_SCOPES = ("by_record", "by_inputs")
"""A tool's ``reuse:``: its stored result serves the same record only (the default), or any
record whose inputs are the same (a function that reads nothing of ``ctx``)."""
EFFECT_KEYS = frozenset({"idempotent", "compensate"})
FUNCTION_TOOL_KEYS = frozenset({"function", "name", "description", "schema", "timeout", "effect"})
"""An entry of an llm action's ``tools:`` written as a mapping (a string is its function)."""
FAN_OUT_KEYS = frozenset({"over", "as", "versions"})
GATES = ("parallel", "sequential")
FAILURE_POLICIES = ("retain_successes", "atomic")
JOIN_NAMES = frozenset({"fulfilled", "rejected", "skipped"})
"""What a join's templates (and a tool join's inputs) see besides its outer ancestors."""
APPROVAL_KEYS = frozenset({"approvers", "expires_in", "policy_version", "on_reject", "on_expire"})
ON_REJECT = ("fail_unit", "fail_run")
ON_EXPIRE = ("fail_unit", "time_out_run")
CHECK_KEYS = frozenset(
    {"name", "expr", "judge", "message", "on_fail", "max_repairs", "repair_run_mode"}
)
JUDGE_KEYS = frozenset({"model", "prompt", "system", "max_tokens", "run_mode"})
FOLLOW_UP_RUN_MODES = ("online", "batch")
CHECK_ON_FAIL = ("repair", "flag", "fail")
DEFAULTABLE_KEYS = ACTION_KEYS - NOT_IN_DEFAULTS

LLM_ONLY_KEYS = frozenset(
    {
        "model",
        "system",
        "prompt",
        "schema",
        "max_tokens",
        "temperature",
        "timeout",
        "max_prompt_chars",
        "run_mode",
        "poll_interval",
        "batch_deadline",
        "flex_fallback_after",
        "rate_limit",
        "attachments",
        "attachments_position",
        "attachment_folders",
        "cache_ttl",
        "context_prefix",
        "auto_batch_min_records",
        "wait_for_cheaper",
        "hybrid",
        "provider_options",
        "checks",
        "tools",
        "max_turns",
        "max_tool_calls",
        "variants",
        "primary",
    }
)
"""Keys that ``defaults:`` gives to llm actions only (docs/workflow-reference.md)."""

TOOL_KEYS = frozenset({"schema"})
"""Llm-only keys a tool may still write on itself: a tool's return value is validated
against its own ``schema``."""

BATCH_TUNING_KEYS = frozenset({"poll_interval", "batch_deadline"})

KINDS = frozenset({"llm", "tool", "join"})
FUTURE_KINDS: frozenset[str] = frozenset()

ATTACHMENT_POSITIONS = ("before", "after")
"""Where an llm action's attachments go, relative to its prompt text."""

CACHE_MODES = ("off", "auto", "on")
"""An llm action's ``cache:`` (YAML reads ``off``/``on`` as false/true: the same modes)."""
CACHE_TTLS = ("5m", "1h")
"""An llm action's ``cache_ttl:``."""

RUN_MODES = ("online", "batch", "flex", "auto")
AVAILABLE_RUN_MODES = frozenset({"online", "batch", "flex", "auto"})
"""Run modes this version executes; a resolved mode outside it is ``not_available_yet``."""

RESERVED_NAMES = (
    frozenset(
        {
            "source",
            "item",
            "version",
            "loop",
            "range",
            "true",
            "false",
            "none",
            "True",
            "False",
            "None",
        }
    )
    | JOIN_NAMES
    | frozenset(keyword.kwlist)
)
"""Names an action cannot take: they are roots or words of the template language."""

CONTEXT_KEYS = frozenset({"observe", "drop"})
HYBRID_KEYS = frozenset({"live_after"})
"""``hybrid:`` of a batch action (B13): when its records still out go live."""
RETRY_KEYS = frozenset({"max_attempts", "backoff"})
BACKOFF_KEYS = frozenset({"initial", "max", "multiplier", "jitter"})
RATE_LIMIT_KEYS = frozenset({"rpm", "tpm"})
