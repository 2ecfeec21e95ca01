"""Per-action settings: merging ``defaults:`` and the per-run mode, then typing each value.

:func:`merge_action` applies docs/workflow-reference.md's filling rules and remembers where every value
was written (``origins``) so a Problem points at the line that set it — on the action,
under ``defaults:``, or on the action's own line for the ``--run-mode`` of a run.
:func:`action_fields` turns the merged values into the keyword arguments of
:class:`~agac.config.model.Action`, reporting every bad value.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from typing import Any

from agac.config.checks import read_checks
from agac.config.keys import (
    APPROVAL_KEYS,
    ATTACHMENT_POSITIONS,
    AVAILABLE_RUN_MODES,
    BACKOFF_KEYS,
    BATCH_TUNING_KEYS,
    CACHE_MODES,
    CACHE_TTLS,
    CONTEXT_KEYS,
    FAILURE_POLICIES,
    FAN_OUT_KEYS,
    GATES,
    HYBRID_KEYS,
    JOIN_NAMES,
    LLM_ONLY_KEYS,
    ON_EXPIRE,
    ON_REJECT,
    RATE_LIMIT_KEYS,
    RETRY_KEYS,
    REUSE_SCOPES,
    RUN_MODES,
)
from agac.config.model import (
    ApprovalSpec,
    ContextSpec,
    FanOutSpec,
    RateLimit,
    RetrySpec,
)
from agac.config.source import Findings, Path, did_you_mean
from agac.config.tooldefs import read_effect, read_function, read_tools
from agac.config.values import (
    read_bool,
    read_duration,
    read_int,
    read_mapping,
    read_number,
    read_str,
    read_str_list,
)

__all__ = [
    "AUTO_BATCH_MIN_RECORDS",
    "BATCH_DEFAULTS",
    "PER_RUN",
    "RawAction",
    "action_fields",
    "merge_action",
    "resolved_run_mode",
    "split_model",
]

BATCH_DEFAULTS = {"poll_interval": 300.0, "batch_deadline": 25 * 3600.0}
"""Batch tuning for a batch (or ``auto``) action that sets none (B11)."""

AUTO_BATCH_MIN_RECORDS = 500
"""``run_mode: auto`` runs an action in batch from this many input records on."""

CLI = ("--run-mode",)
"""Origin marker of a value that came from the run's ``--run-mode``."""

PER_RUN = {
    "run_mode": CLI,
    "poll_interval": ("--poll-interval",),
    "batch_deadline": ("--batch-deadline",),
}
"""Origin marker of each value a run can set for itself (``agac run --…``)."""


@dataclass
class RawAction:
    """One action's entry after merging, before typing."""

    index: int
    name: str
    kind: str
    path: Path
    line: int
    dependencies: list[str]
    own: dict[str, Any]
    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, Path] = field(default_factory=dict)
    own_origins: dict[str, Path] = field(default_factory=dict)
    """Where an own key was written when not on the action itself (a variant's keys)."""
    variant: str | None = None
    """The variant this action runs (config/variants.py), with ``variant_of`` its action."""
    variant_of: str | None = None

    def origin(self, key: str) -> Path:
        """Where ``key`` was written; the action itself for a value set by the run."""
        where = self.origins.get(key, self.path)
        return self.path if where in PER_RUN.values() else where

    def set_by_run(self, key: str) -> bool:
        return self.origins.get(key) == PER_RUN[key]


def merge_action(
    raw: RawAction,
    defaults: dict[str, Any],
    run_mode: str | None,
    tuning: dict[str, float] | None = None,
) -> None:
    """Fill ``raw.values``: the action's own keys, else the run's ``run_mode`` (llm
    actions only), else ``defaults`` that apply to its kind.

    Batch tuning fills only an action that ends up batched — or may, with ``auto`` —:
    its own value, else the run's ``tuning`` (seconds, already checked), else the one in
    ``defaults``.
    """
    tuning = tuning or {}
    llm = raw.kind == "llm"
    for key, value in defaults.items():
        if key in raw.own or (key in LLM_ONLY_KEYS and not llm) or key in BATCH_TUNING_KEYS:
            continue
        if key == "cache" and not llm and isinstance(value, str):
            continue  # a prompt-cache mode (auto, "off") is for llm actions only
        raw.values[key], raw.origins[key] = value, ("defaults", key)
    if llm and run_mode is not None and "run_mode" not in raw.own:
        raw.values["run_mode"], raw.origins["run_mode"] = run_mode, CLI
    for key, value in raw.own.items():
        raw.values[key], raw.origins[key] = value, raw.own_origins.get(key, raw.path + (key,))
    if llm and resolved_run_mode(raw.values.get("run_mode")) in ("batch", "auto"):
        for key in BATCH_TUNING_KEYS - raw.own.keys():
            if key in tuning:
                raw.values[key], raw.origins[key] = tuning[key], PER_RUN[key]
            elif key in defaults:
                raw.values[key], raw.origins[key] = defaults[key], ("defaults", key)


def resolved_run_mode(value: Any) -> str | None:
    """``online``/``batch``/``flex``/``auto`` for a valid spelling (any case), ``online`` when unset,
    else None."""
    if value is None:
        return "online"
    if isinstance(value, str) and value.strip().lower() in RUN_MODES:
        return value.strip().lower()
    return None


MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]*(?:/[A-Za-z0-9][A-Za-z0-9._:@+-]*)*")
"""A model name: segments of letters, digits and ``. _ : @ + -`` joined by ``/``, each
starting with a letter or digit. So no ``..`` segment, no empty segment, no ``?``, ``#``,
``%`` or space: a name never changes which URL of the provider a request goes to."""


def split_model(model: str) -> tuple[str, str] | None:
    """``provider/model`` -> (provider, model name); the model name may hold more slashes
    (``groq/meta-llama/llama-4-scout``), within the characters of ``MODEL_NAME``."""
    provider, sep, name = model.partition("/")
    if not sep or not provider.strip() or not name.strip() or provider != provider.strip():
        return None
    if MODEL_NAME.fullmatch(name) is None:
        return None
    return provider, name


def action_fields(f: Findings, raw: RawAction) -> dict[str, Any]:
    """Typed Action keyword arguments (besides name, kind, line, dependencies, ancestors)."""
    v, at = raw.values, raw.origin
    out: dict[str, Any] = {
        "context": _context(f, v.get("context"), at("context")),
        "retry": _retry(f, v.get("retry"), at("retry")),
        "cache": True,
        "max_concurrency": 16,
    }
    if "when" in v:
        out["when"] = read_str(f, v["when"], at("when"))
    if "cache" in v and raw.kind != "llm":
        out["cache"] = read_bool(f, v["cache"], at("cache"))
    if "reuse" in v:
        out["reuse"] = _reuse(f, raw)
    if "max_concurrency" in v:
        out["max_concurrency"] = read_int(f, v["max_concurrency"], at("max_concurrency"))
    if "schema" in v:
        out["schema"] = _schema(f, v["schema"], at("schema"))
    if raw.kind == "llm":
        out.update(_llm_fields(f, raw))
    else:
        out.update(model=None, max_tokens=None, timeout=None, run_mode=None)
        if "function" in v:
            out["function"] = _function(f, v["function"], at("function"))
    if "effect" in v:
        if raw.kind != "tool":
            f.error(
                "invalid_value",
                f"'effect' is for tool actions, but {raw.name!r} is an llm action",
                at("effect"),
                hint="an effect is something a tool function does",
            )
        else:
            out["effect"] = read_effect(f, v["effect"], at("effect"))
    out.update(_fan_out_fields(f, raw))
    if raw.variant is not None:
        out.update(variant=raw.variant, variant_of=raw.variant_of)
    if "approval" in v:
        out["approval"] = _approval(f, v["approval"], at("approval"))
    return out


def _approval(f: Findings, value: Any, path: Path) -> ApprovalSpec | None:
    """``approval: {approvers, expires_in, policy_version, on_reject, on_expire}`` (A1).
    Whether each approver names a known user or group is checked against ``agac.yml``
    (config/environment.py)."""
    body = read_mapping(f, value, path)
    if body is None:
        return None
    f.unknown_keys(body, APPROVAL_KEYS, path, "approval")
    if "approvers" not in body:
        f.error(
            "missing_key",
            "approval has no 'approvers'",
            path,
            hint="approval: {approvers: [alice, support-leads]} (users or groups of agac.yml)",
        )
        return None
    approvers = read_str_list(f, body["approvers"], path + ("approvers",), allow_single=True)
    if approvers is not None and not approvers:
        f.error(
            "invalid_value",
            "approval.approvers must name at least one user or group",
            path + ("approvers",),
        )
        approvers = None
    values: dict[str, Any] = {}
    if body.get("expires_in") is not None:
        values["expires_in"] = read_duration(
            f, body["expires_in"], path + ("expires_in",), code="invalid_expires_in"
        )
    if body.get("policy_version") is not None:
        version = body["policy_version"]
        if isinstance(version, (int, float)) and not isinstance(version, bool):
            version = str(version)
        values["policy_version"] = read_str(f, version, path + ("policy_version",))
    for key, choices in (("on_reject", ON_REJECT), ("on_expire", ON_EXPIRE)):
        if body.get(key) is None:
            continue
        if body[key] in choices:
            values[key] = body[key]
        else:
            f.error(
                "invalid_value",
                f"approval.{key} {body[key]!r} is not one of {', '.join(choices)}",
                path + (key,),
                hint=did_you_mean(str(body[key]), choices) or f"one of {', '.join(choices)}",
            )
            values[key] = None
    if approvers is None or any(v is None for v in values.values()):
        return None
    return ApprovalSpec(tuple(dict.fromkeys(approvers)), **values)


def _fan_out_fields(f: Findings, raw: RawAction) -> dict[str, Any]:
    """``fan_out``, ``gate``, ``join`` and ``failure_policy`` (docs/workflow-reference.md, Fan-out and join). ``gate`` and
    ``failure_policy`` from ``defaults:`` fill only the actions they apply to; written on
    an action they do not apply to, they are an error."""
    v, at = raw.values, raw.origin
    out: dict[str, Any] = {}
    if "fan_out" in v:
        out["fan_out"] = _fan_out(f, v["fan_out"], at("fan_out"))
    if "gate" in v:
        gate = _choice(f, v["gate"], at("gate"), GATES, "gate")
        if "fan_out" in v:
            out["gate"] = gate
        elif "gate" in raw.own:
            f.error(
                "invalid_value",
                f"'gate' is set on action {raw.name!r}, which has no fan_out",
                at("gate"),
                hint="gate orders the items of a fan_out",
            )
    is_join = raw.kind == "join" or "join" in v
    if "join" in v:
        if raw.kind == "join" and v["join"] is None:
            pass
        else:
            out["join"] = read_str(f, v["join"], at("join"))
    if "failure_policy" in v:
        policy = _choice(
            f, v["failure_policy"], at("failure_policy"), FAILURE_POLICIES, "failure_policy"
        )
        if is_join:
            out["failure_policy"] = policy
        elif "failure_policy" in raw.own:
            f.error(
                "invalid_value",
                f"'failure_policy' is set on action {raw.name!r}, which is not a join",
                at("failure_policy"),
                hint="failure_policy belongs on the join (kind: join, or join: ACTION)",
            )
    return out


def _choice(f: Findings, value: Any, path: Path, allowed: tuple[str, ...], key: str) -> str | None:
    if value in allowed:
        return str(value)
    f.error(
        "invalid_value",
        f"{key} {value!r} is not one of {', '.join(allowed)}",
        path,
        hint=f"{key}: {allowed[0]}",
    )
    return None


def _fan_out(f: Findings, value: Any, path: Path) -> FanOutSpec | None:
    body = read_mapping(f, value, path)
    if body is None:
        return None
    f.unknown_keys(body, FAN_OUT_KEYS, path, "fan_out")
    over, versions = body.get("over"), body.get("versions")
    if (over is None) == (versions is None):
        f.error(
            "invalid_fan_out",
            "fan_out needs exactly one of 'over' (a list field) or "
            "'versions' (a number of answers)",
            path,
            hint="fan_out: {over: extract.clauses, as: clause} or fan_out: {versions: 3}",
        )
        return None
    if versions is not None:
        if "as" in body:
            f.error(
                "invalid_fan_out",
                "'as' names the item of fan_out over a list; with versions the item is 'version'",
                path + ("as",),
            )
        n = read_int(f, versions, path + ("versions",))
        return None if n is None else FanOutSpec(versions=n, as_name="version")
    text = read_str(f, over, path + ("over",))
    if text is None:
        return None
    parts = text.split(".")
    if not all(p.isidentifier() for p in parts) or text == "source":
        f.error(
            "invalid_fan_out",
            f"fan_out.over {text!r} is not a dotted path to a list (extract.clauses, source.items)",
            path + ("over",),
        )
        return None
    name = body.get("as", "item")
    if (
        not isinstance(name, str)
        or not name.isidentifier()
        or keyword.iskeyword(name)
        or name in JOIN_NAMES | {"source", "version", "loop", "range"}
    ):
        f.error(
            "invalid_fan_out",
            f"fan_out.as {name!r} must be an identifier and not a reserved word",
            path + ("as",),
            hint="e.g. as: clause",
        )
        return None
    return FanOutSpec(over=text, as_name=name)


def _llm_fields(f: Findings, raw: RawAction) -> dict[str, Any]:
    v, at = raw.values, raw.origin
    out: dict[str, Any] = {"max_tokens": 1024, "timeout": 120.0}
    for key in ("system", "prompt"):
        if key in v:
            out[key] = read_str(f, v[key], at(key))
    if "model" in v and (model := read_str(f, v["model"], at("model"))) is not None:
        parts = split_model(model)
        if parts is None:
            f.error(
                "invalid_model",
                f"model {model!r} of action {raw.name!r} is not "
                "provider/model with a model name of letters, digits and . _ : @ + - "
                "(segments joined by /, each starting with a letter or digit)",
                at("model"),
                hint="e.g. openai/gpt-4o-mini or mock/any",
            )
        else:
            out.update(model=model, provider=parts[0], model_name=parts[1])
    if "max_tokens" in v:
        out["max_tokens"] = read_int(f, v["max_tokens"], at("max_tokens"))
    if (
        "max_prompt_chars" in v
        and (cap := read_int(f, v["max_prompt_chars"], at("max_prompt_chars"))) is not None
    ):
        out["max_prompt_chars"] = cap
    if "temperature" in v and v["temperature"] is not None:
        out["temperature"] = read_number(f, v["temperature"], at("temperature"), maximum=2.0)
    if "timeout" in v:
        out["timeout"] = read_duration(f, v["timeout"], at("timeout"))
    if "rate_limit" in v:
        out["rate_limit"] = _rate_limit(f, v["rate_limit"], at("rate_limit"))
    if "attachments" in v:
        out["attachments"] = _attachments(f, v["attachments"], at("attachments"))
    if "attachment_folders" in v:
        out["attachment_folders"] = _folders(f, v["attachment_folders"], at("attachment_folders"))
    if "attachments_position" in v:
        out["attachments_position"] = _choice(
            f,
            v["attachments_position"],
            at("attachments_position"),
            ATTACHMENT_POSITIONS,
            "attachments_position",
        )
    out["run_mode"] = _run_mode(f, raw)
    out.update(_tuning(f, raw, out["run_mode"]))
    out["auto_batch_min_records"] = _auto_threshold(f, raw, out["run_mode"])
    out["wait_for_cheaper"] = _wait_for_cheaper(f, raw, out["run_mode"])
    out["flex_fallback_after"] = _flex_fallback(f, raw, out["run_mode"])
    if "hybrid" in v:
        out["live_after"] = _hybrid(f, raw, out["run_mode"])
    out.update(_cache_fields(f, raw))
    if "checks" in v:
        out["checks"] = read_checks(f, v["checks"], at("checks"))
    if "provider_options" in v:
        found = read_mapping(f, v["provider_options"], at("provider_options"))
        out["provider_options"] = {str(k): value for k, value in (found or {}).items()}
    out.update(_tool_fields(f, raw))
    return out


def _tool_fields(f: Findings, raw: RawAction) -> dict[str, Any]:
    """``tools:`` and its bounds; the bounds alone (with no tools) are an error, as a key
    that would do nothing."""
    v, at = raw.values, raw.origin
    out: dict[str, Any] = {}
    functions = False
    if "tools" in v:
        out["tools"], out["web_search"] = read_tools(f, v["tools"], at("tools"))
        # a web search agac runs is a loop too (an Ollama search: config/websearch.py
        # refuses the bounds where the provider searches inside its request)
        functions = bool(out["tools"]) or out["web_search"] is not None
        functions = functions or not isinstance(v["tools"], list)
    for key in ("max_turns", "max_tool_calls"):
        if key not in v:
            continue
        if not functions and key in raw.own:
            f.error(
                "invalid_value",
                f"{key!r} bounds a tool loop, but action {raw.name!r} has no function tools",
                at(key),
                hint=f"add tools: [module:function], or remove {key!r}",
            )
        elif (n := read_int(f, v[key], at(key))) is not None:
            out[key] = n
    return out


def _reuse(f: Findings, raw: RawAction) -> str:
    """A tool's ``reuse:`` (``by_record`` or ``by_inputs``); an error on an llm action,
    whose answers are reused by their request (which names no record)."""
    value, path = raw.values["reuse"], raw.origin("reuse")
    if raw.kind == "llm":
        f.error(
            "invalid_value",
            f"'reuse' is for tool actions, but {raw.name!r} is an llm action",
            path,
            hint="an llm answer is reused by its request; remove 'reuse'",
        )
    elif value not in REUSE_SCOPES:
        f.error(
            "invalid_value",
            f"reuse {value!r} of action {raw.name!r} is not one of {', '.join(REUSE_SCOPES)}",
            path,
            hint=did_you_mean(str(value), REUSE_SCOPES) or "reuse: by_record (the default)",
        )
    else:
        return str(value)
    return "by_record"


def _cache_fields(f: Findings, raw: RawAction) -> dict[str, Any]:
    """``cache`` (``off``/``auto``/``on``; YAML reads unquoted ``off``/``on`` as false/true),
    ``cache_ttl`` (``5m``/``1h``) and ``context_prefix`` (a template, checked with the
    others) of an llm action."""
    v, at = raw.values, raw.origin
    out: dict[str, Any] = {}
    if "cache" in v:
        value = v["cache"]
        mode = (
            {False: "off", True: "on"}.get(value)
            if isinstance(value, bool)
            else value.strip().lower()
            if isinstance(value, str)
            else None
        )
        if mode in CACHE_MODES:
            out["cache_mode"] = mode
        else:
            f.error(
                "invalid_cache",
                f"cache {value!r} of action {raw.name!r} is not one of {', '.join(CACHE_MODES)}",
                at("cache"),
                hint=did_you_mean(str(value), CACHE_MODES) or "cache: auto (the default)",
            )
    if "cache_ttl" in v:
        ttl = v["cache_ttl"]
        if isinstance(ttl, str) and ttl.strip().lower() in CACHE_TTLS:
            out["cache_ttl"] = ttl.strip().lower()
        else:
            f.error(
                "invalid_cache_ttl",
                f"cache_ttl {ttl!r} of action {raw.name!r} is not one of {', '.join(CACHE_TTLS)}",
                at("cache_ttl"),
                hint="cache_ttl: 5m (the default), or 1h (Anthropic's longer cache)",
            )
    if v.get("context_prefix") is not None:
        out["context_prefix"] = read_str(f, v["context_prefix"], at("context_prefix"))
    return out


def _hybrid(f: Findings, raw: RawAction, mode: str | None) -> float | None:
    """``hybrid: {live_after: <duration>}`` (B13): how long after the run's admission the
    action's records still in batches go live. Batch (or auto) actions only: written on
    another it is an error, from ``defaults:`` it fills only those. The run's ``deadline``
    is checked against it once the whole file is read."""
    if "hybrid" not in raw.own and mode not in ("batch", "auto"):
        return None
    where = raw.origin("hybrid")
    body = read_mapping(f, raw.values["hybrid"], where)
    if body is None:
        return None
    f.unknown_keys(body, HYBRID_KEYS, where, "hybrid")
    if mode not in ("batch", "auto"):
        f.error(
            "invalid_hybrid",
            f"hybrid is set on action {raw.name!r}, whose run_mode is {mode}",
            where,
            hint="hybrid switches a batch action live; it needs "
            "run_mode: batch (or auto, when auto chooses batch)",
        )
        return None
    if "live_after" not in body:
        f.error(
            "invalid_hybrid",
            f"hybrid of action {raw.name!r} needs live_after",
            where,
            hint="e.g. hybrid: {live_after: 20h}",
        )
        return None
    return read_duration(f, body["live_after"], where + ("live_after",), code="invalid_hybrid")


def _attachments(f: Findings, value: Any, path: Path) -> tuple[str, ...] | None:
    """``attachments:``: a list of templates (each a path, a data: URL or a list of them)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        f.error(
            "invalid_value",
            f"attachments must be a list of templates, got {value!r}",
            path,
            hint='attachments: ["{{ source.file }}"]',
        )
        return None
    out: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            f.error(
                "invalid_value",
                f"attachments entry {item!r} is not a template (a text "
                "giving a path, a data: URL or a list of them)",
                path + (i,),
                hint='e.g. "{{ source.invoice }}" or "scans/{{ source.id }}.png"',
            )
            return None
        out.append(item)
    return tuple(out)


def _folders(f: Findings, value: Any, path: Path) -> tuple[str, ...] | None:
    """``attachment_folders:``: a list of folders (absolute, ``~/…``, or relative to the
    project root) that attachment paths may lead into besides the project."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        f.error(
            "invalid_value",
            f"attachment_folders must be a list of folders, got {value!r}",
            path,
            hint="attachment_folders: [/srv/scans]",
        )
        return None
    return tuple(v.strip() for v in value)


def _run_mode(f: Findings, raw: RawAction) -> str | None:
    value = raw.values.get("run_mode")
    mode = resolved_run_mode(value)
    where = raw.origin("run_mode")
    origin = raw.origins.get("run_mode", ())
    source = "--run-mode" if origin == CLI else "run_mode"
    # A default is reported once, at its line, not once per action it fills.
    who = "" if origin[:1] == ("defaults",) else f" (action {raw.name!r})"
    if mode is None:
        f.error(
            "unsupported_run_mode",
            f"{source} {value!r} is not one of {', '.join(RUN_MODES)}{who}",
            where,
            hint="run_mode is online, batch, flex or auto",
        )
    elif mode not in AVAILABLE_RUN_MODES:
        f.error(
            "not_available_yet",
            f"{source} {mode!r} is not available in this version of agac{who}",
            where,
            hint=f"use run_mode: {min(AVAILABLE_RUN_MODES)}",
        )
    return mode


def _auto_threshold(f: Findings, raw: RawAction, mode: str | None) -> int | None:
    """``auto_batch_min_records`` of an ``auto`` action (default 500), else None. Written on
    an action whose mode is not ``auto`` it would do nothing: an error; from ``defaults:``
    it fills only the ``auto`` actions."""
    key = "auto_batch_min_records"
    value = None
    if key in raw.values:
        value = read_int(f, raw.values[key], raw.origin(key))
    if key in raw.own and mode in ("online", "batch", "flex"):
        f.error(
            "auto_threshold_without_auto",
            f"{key} is set on action {raw.name!r}, whose run_mode is {mode}",
            raw.origin(key),
            hint="it applies to run_mode: auto only; drop it or write run_mode: auto",
        )
    if mode != "auto":
        return None
    return value if key in raw.values else AUTO_BATCH_MIN_RECORDS


def _wait_for_cheaper(f: Findings, raw: RawAction, mode: str | None) -> bool | None:
    """``wait_for_cheaper`` of an ``auto`` action (default true), else None; written on an
    action of another mode it would do nothing: an error."""
    key = "wait_for_cheaper"
    value = read_bool(f, raw.values[key], raw.origin(key)) if key in raw.values else None
    if key in raw.own and mode in ("online", "batch", "flex"):
        f.error(
            "auto_threshold_without_auto",
            f"{key} is set on action {raw.name!r}, whose run_mode is {mode}",
            raw.origin(key),
            hint="it applies to run_mode: auto only; drop it or write run_mode: auto",
        )
    if mode != "auto":
        return None
    return True if value is None else value


def _flex_fallback(f: Findings, raw: RawAction, mode: str | None) -> float | None:
    """``flex_fallback_after`` of a ``flex`` (or ``auto``) action: how long after a unit's
    first flex call what flex has not answered goes at the standard tier. Written on an
    action of another mode it would do nothing: an error; from ``defaults:`` it fills only
    the ``flex`` and ``auto`` actions."""
    key = "flex_fallback_after"
    if key not in raw.values:
        return None
    if mode not in ("flex", "auto"):
        if key in raw.own:
            f.error(
                "flex_fallback_without_flex",
                f"{key} is set on action {raw.name!r}, whose run_mode is {mode}",
                raw.origin(key),
                hint="it applies to run_mode: flex (or auto, when auto chooses flex); "
                "drop it or write run_mode: flex",
            )
        return None
    return read_duration(f, raw.values[key], raw.origin(key), code="invalid_flex_fallback")


def _tuning(f: Findings, raw: RawAction, mode: str | None) -> dict[str, Any]:
    codes = {"poll_interval": "invalid_poll_interval", "batch_deadline": "invalid_batch_deadline"}
    out: dict[str, Any] = {"poll_interval": None, "batch_deadline": None}
    for key, code in codes.items():
        if raw.set_by_run(key):
            out[key] = raw.values[key]
        elif key in raw.values:
            out[key] = read_duration(f, raw.values[key], raw.origin(key), code=code)
        if key in raw.own and mode in ("online", "flex"):
            f.error(
                "tuning_without_batch",
                f"{key} is set on action {raw.name!r}, whose run_mode is {mode}",
                raw.origin(key),
                hint="batch tuning applies to run_mode: batch; check the run_mode spelling",
            )
        if mode in ("batch", "auto") and out[key] is None:
            out[key] = BATCH_DEFAULTS[key]
        if mode not in ("batch", "auto"):
            out[key] = None
    return out


def _context(f: Findings, value: Any, path: Path) -> ContextSpec | None:
    if value is None:
        return ContextSpec()
    body = read_mapping(f, value, path)
    if body is None:
        return None
    f.unknown_keys(body, CONTEXT_KEYS, path, "context")
    observe = drop = None
    if body.get("observe") is not None:
        observe = read_str_list(f, body["observe"], path + ("observe",))
    if body.get("drop") is not None:
        drop = read_str_list(f, body["drop"], path + ("drop",))
    for key, paths in (("observe", observe), ("drop", drop)):
        for i, item in enumerate(paths or ()):
            if not _valid_view_path(item):
                f.error(
                    "invalid_value",
                    f"context.{key} entry {item!r} is not a dotted path (source.text, classify.*)",
                    path + (key, i),
                )
    return ContextSpec(None if observe is None else tuple(observe), tuple(drop or ()))


def _valid_view_path(text: str) -> bool:
    parts = text.split(".")
    return (
        all(parts) and "*" not in "".join(parts[:-1]) and (parts[-1] == "*" or "*" not in parts[-1])
    )


def _retry(f: Findings, value: Any, path: Path) -> RetrySpec | None:
    if value is None:
        return RetrySpec()
    body = read_mapping(f, value, path)
    if body is None:
        return None
    f.unknown_keys(body, RETRY_KEYS, path, "retry")
    values: dict[str, Any] = {}
    if "max_attempts" in body:
        values["max_attempts"] = read_int(f, body["max_attempts"], path + ("max_attempts",))
    backoff = body.get("backoff")
    bpath = path + ("backoff",)
    if isinstance(backoff, dict):
        f.unknown_keys(backoff, BACKOFF_KEYS, bpath, "retry.backoff")
        for key in ("initial", "max"):
            if key in backoff:
                values[f"backoff_{key}"] = read_duration(f, backoff[key], bpath + (key,))
        if "multiplier" in backoff:
            values["backoff_multiplier"] = read_number(
                f, backoff["multiplier"], bpath + ("multiplier",), minimum=1.0
            )
        if "jitter" in backoff:
            values["jitter"] = read_bool(f, backoff["jitter"], bpath + ("jitter",))
    elif backoff is not None:
        values["backoff_initial"] = read_duration(f, backoff, bpath)
    if any(v is None for v in values.values()):
        return None
    return RetrySpec(**values)


def _rate_limit(f: Findings, value: Any, path: Path) -> RateLimit | None:
    body = read_mapping(f, value, path)
    if body is None:
        return None
    f.unknown_keys(body, RATE_LIMIT_KEYS, path, "rate_limit")
    limits = {
        key: read_number(f, body[key], path + (key,), exclusive_minimum=True)
        for key in RATE_LIMIT_KEYS
        if body.get(key) is not None
    }
    return RateLimit(**limits)


def _function(f: Findings, value: Any, path: Path) -> str | None:
    return read_function(
        f, value, path, "e.g. function: tools.mail:send_reply (resolved from the project root)"
    )


def _schema(f: Findings, value: Any, path: Path) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        f.error("invalid_schema", f"schema must be a JSON Schema object, got {value!r}", path)
        return None
    # jsonschema costs ~0.1 s to import: only workflows with a schema pay for it.
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(value).check_schema(value)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "schema"
        f.error(
            "invalid_schema", f"schema is not a valid JSON Schema at {where}: {exc.message}", path
        )
        return None
    return value  # its $refs are resolved where the project root is known (X2: schemarefs)
