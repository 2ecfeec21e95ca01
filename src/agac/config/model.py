"""The resolved workflow the engine consumes: typed, frozen, defaults applied.

A :class:`Workflow` is what validation produces and what a run records: its
``snapshot()`` is plain JSON stored with the run, and ``Workflow.from_snapshot`` rebuilds
the same value, so a resumed run executes exactly what was admitted (docs/workflow-reference.md, R1).

``config_hash`` covers everything that changes execution — actions and every resolved
setting, the input spec, ``partial_ok`` — and nothing that does not (the workflow's
file location, comments and layout, key order, line numbers, ``description``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agac.providers.servertools import WebSearch

__all__ = [
    "DEFAULT_MAX_PROMPT_CHARS",
    "DEFAULT_MAX_TURNS",
    "SNAPSHOT_VERSION",
    "Action",
    "ApprovalSpec",
    "Budget",
    "CheckSpec",
    "ContextSpec",
    "EffectSpec",
    "FanOutSpec",
    "FunctionTool",
    "InputSpec",
    "JudgeSpec",
    "RateLimit",
    "RetrySpec",
    "Workflow",
]

SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class InputSpec:
    """Where records come from: a file, folder or glob relative to the project root; or,
    with ``records``, the records a caller gives ``agac.run(records=…)`` (``path`` is then
    empty: the records replace it)."""

    path: str
    id_field: str | None = None
    records: bool = False
    format: str | None = None
    """``input.format:`` — the format of the input files when their extension does not
    say it (None: from each file's extension)."""


@dataclass(frozen=True)
class Budget:
    """A run's spending cap (R5): USD and/or tokens (input + output); None = no cap."""

    usd: float | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class EffectSpec:
    """A tool action's side effect (E1): whether the service dedups by idempotency key,
    and the ``module:function`` that compensates it, run only on request."""

    idempotent: bool = False
    compensate: str | None = None


@dataclass(frozen=True)
class FanOutSpec:
    """An action that runs once per item (docs/workflow-reference.md, Fan-out and join): over the list at ``over`` (a dotted
    path, ``extract.clauses`` or ``source.items``), each item seen under ``as_name``; or
    ``versions`` independent answers to the same input, each seeing ``version``."""

    over: str | None = None
    as_name: str = "item"
    versions: int | None = None


@dataclass(frozen=True)
class ApprovalSpec:
    """An action's approval policy (A1): each unit waits for a person before it acts.

    ``approvers`` are user or group names (groups from ``agac.yml``); a proposal expires
    ``expires_in`` seconds after it is made; ``policy_version`` is bound into every
    proposal; ``on_reject``/``on_expire`` fail only the unit (``fail_unit``) or end the
    run (``fail_run`` / ``time_out_run``, the seed's behaviour)."""

    approvers: tuple[str, ...]
    expires_in: float = 24 * 3600.0
    policy_version: str = "1"
    on_reject: str = "fail_unit"
    on_expire: str = "fail_unit"


@dataclass(frozen=True)
class ContextSpec:
    """What an action sees. ``observe`` None means everything visible (``source`` and every
    ancestor); otherwise only the listed dotted paths (``classify.*`` is all of
    ``classify``). ``drop`` removes paths afterwards."""

    observe: tuple[str, ...] | None = None
    drop: tuple[str, ...] = ()


@dataclass(frozen=True)
class RetrySpec:
    """Attempts per unit and exponential backoff ``initial * multiplier**n`` capped at
    ``max`` (seconds), with full jitter when ``jitter``."""

    max_attempts: int = 3
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    backoff_multiplier: float = 2.0
    jitter: bool = True


@dataclass(frozen=True)
class CheckSpec:
    """One ``checks:`` entry of an llm action: a sandboxed expression over ``answer``,
    ``source`` and the ancestors' outputs that must be true of every answer (or a judge:
    a model that grades it), and what a false one does — ``repair`` (ask again with ``message``, up to ``max_repairs`` times,
    then fail), ``flag`` (answered, marked) or ``fail`` (the unit fails ``check_failed``)."""

    name: str
    expr: str | None = None
    """The expression (None for a judge)."""
    message: str | None = None
    on_fail: str = "fail"
    max_repairs: int = 1
    judge: JudgeSpec | None = None
    """A model that grades the answer instead of an expression (engine/judges.py)."""
    repair_run_mode: str | None = None
    """How a repair of an answer read from a batch is asked: ``batch`` (the next batch
    round, engine/batch/rounds.py) or ``online``; None: as the action runs."""


@dataclass(frozen=True)
class PilotSpec:
    """A workflow's ``pilot:``: ``agac run`` runs it on ``sample`` records first (``seed``,
    ``stratify`` as for ``agac pilot``); with ``approve``, the full run waits for one of
    ``approvers`` to approve the pilot's results and projected cost, within ``expires_in``
    seconds of the proposal."""

    sample: int
    seed: int = 0
    stratify: str | None = None
    approve: bool = False
    approvers: tuple[str, ...] = ()
    expires_in: float = 24 * 3600.0


@dataclass(frozen=True)
class JudgeSpec:
    """A ``judge:`` check's model call: ``model`` (``provider/name``) asked ``prompt`` (a
    template that sees ``answer``, ``source`` and the ancestors' outputs), after ``system``
    when given, to answer the built-in verdict schema (``pass``, ``reason``)."""

    model: str
    provider: str
    model_name: str
    prompt: str
    system: str | None = None
    max_tokens: int = 256
    run_mode: str | None = None
    """``online`` or ``batch``; None: as the action it grades runs (a batch action's
    judges are asked in a second batch round, engine/batch/rounds.py)."""


@dataclass(frozen=True)
class FunctionTool:
    """One ``tools:`` entry of an llm action: a Python function of the project the model
    may call (``module:name``), the name the model knows it by (the function's own name
    unless given), what it is for (the docstring's first paragraph unless given), the JSON
    Schema of its arguments (None: worked out from its type hints and docstring,
    :mod:`agac.tools.signature`), how long one call may run (seconds) and, for a function
    with side effects (``effect:``), how its calls go through the effects rules (E1, E2)."""

    function: str
    name: str
    description: str | None = None
    schema: dict[str, Any] | None = None
    timeout: float = 60.0
    effect: EffectSpec | None = None


DEFAULT_MAX_TURNS = 8
"""An llm action with ``tools:`` asks the model at most this many times per unit."""


@dataclass(frozen=True)
class RateLimit:
    """Requests and tokens per minute for one action (None: not limited)."""

    rpm: float | None = None
    tpm: float | None = None


DEFAULT_MAX_PROMPT_CHARS = 8_000_000
"""An llm action's ``max_prompt_chars`` unless it sets one (the renderer's cap of the same
name when it is given none; a test keeps the two equal)."""


@dataclass(frozen=True)
class Action:
    """One resolved step. Llm-only fields (``model`` … ``batch_deadline``) are None on tools.

    ``poll_interval`` and ``batch_deadline`` are set (seconds) only when ``run_mode`` is
    ``batch`` or ``auto``. ``ancestors`` is every action this one depends on, transitively, in the
    workflow's topological order: exactly the names a template of this action may read.
    """

    name: str
    kind: str = "llm"
    line: int = 0
    dependencies: tuple[str, ...] = ()
    ancestors: tuple[str, ...] = ()
    model: str | None = None
    provider: str | None = None
    model_name: str | None = None
    system: str | None = None
    prompt: str | None = None
    schema: dict[str, Any] | None = None
    context: ContextSpec = field(default_factory=ContextSpec)
    when: str | None = None
    retry: RetrySpec = field(default_factory=RetrySpec)
    max_tokens: int | None = 1024
    temperature: float | None = None
    timeout: float | None = 120.0
    max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS
    """The longest rendered system + prompt, in characters; over it the unit fails
    ``prompt_too_large`` before anything is sent or stored."""
    max_concurrency: int = 16
    rate_limit: RateLimit | None = None
    run_mode: str | None = "online"
    poll_interval: float | None = None
    batch_deadline: float | None = None
    live_after: float | None = None
    """``hybrid: {live_after}`` (B13): seconds after the run's admission when the action's
    records still in batches are sent live; batch actions only."""
    flex_fallback_after: float | None = None
    """``run_mode: flex`` (or ``auto``): seconds after a unit's first flex call when what
    flex has not answered is sent at the standard tier (None: it stays on flex)."""
    auto_batch_min_records: int | None = None
    """``run_mode: auto``: batch from this many input records on (set only for ``auto``)."""
    wait_for_cheaper: bool | None = None
    """``run_mode: auto``: whether the run may hold the action until its model's cheaper
    hours open (engine/lifecycle/cheaper.py); set only for ``auto`` (default True)."""
    auto_choice: str | None = None
    """In a run's config only: why ``run_mode: auto`` chose this action's ``run_mode``
    (then ``online``, ``flex`` or ``batch``) at admission; None when the file chose it."""
    function: str | None = None
    cache: bool = True
    reuse: str = "by_record"
    """A tool's ``reuse:`` — whose stored results it may take: the same record's only
    (``by_record``) or any record's with the same inputs (``by_inputs``)."""
    code_hash: str | None = None
    """In a run's config only: the hash of a tool's code as the run was admitted with it
    (agac.config.functions.code_hash); a run carries a tool's outcomes from the previous
    one only when it is unchanged."""
    effect: EffectSpec | None = None
    fan_out: FanOutSpec | None = None
    gate: str = "parallel"
    """``sequential``: each item of this fan-out waits for the previous one."""
    join: str | None = None
    """For a join (``kind: join`` or ``join:``): the fan-out action whose items it collects."""
    failure_policy: str = "retain_successes"
    approval: ApprovalSpec | None = None
    attachments: tuple[str, ...] = ()
    """Templates, each giving the files sent with the prompt (a path or a ``data:`` URL,
    or a list of them)."""
    attachments_position: str = "before"
    """Where the attachments go: ``before`` or ``after`` the prompt text."""
    attachment_folders: tuple[str, ...] = ()
    """Folders outside the project that attachment paths may lead into, as written (each
    resolved when a run reads them: ``agac.confinement``); () is the project alone."""
    cache_mode: str = "auto"
    """An llm action's ``cache:`` — ``off``, ``auto`` or ``on`` (docs/workflow-reference.md,
    Prompt caching). Not ``cache``: that is a tool's reuse of its outputs."""
    cache_ttl: str = "5m"
    """How long the provider keeps the cached prefix: ``5m`` or ``1h`` (Anthropic)."""
    context_prefix: str | None = None
    """The ``context_prefix:`` template: rendered once per run, from project files."""
    context_text: str | None = None
    """That template as rendered at the run's admission (None until then): kept in the run's
    config snapshot, so a continued run sends the prefix it was admitted with."""
    checks: tuple[CheckSpec, ...] = ()
    """``checks:``: what every answer of this llm action must satisfy (engine/checks.py)."""
    provider_options: dict[str, Any] = field(default_factory=dict)
    """``provider_options:``: options of the provider's spec (``request_options``) that
    change the answer, checked and converted; sent with each request and part of its
    fingerprint."""
    tools: tuple[FunctionTool, ...] = ()
    """``tools:``: the functions the model may call; with any, a unit is a loop of turns
    (engine/walk/toolloop.py) bounded by ``max_turns`` and ``max_tool_calls``."""
    max_turns: int = DEFAULT_MAX_TURNS
    max_tool_calls: int | None = None
    web_search: WebSearch | None = None
    """``tools: [web_search]``: the provider's own web search, run inside each request (not
    a loop of agac's), or, where its spec says ``in_loop`` (Ollama), a ``web_search``
    function agac runs in the record's loop; its sources are the answer's citations."""
    variant: str | None = None
    """``variants:`` (config/variants.py): the variant of ``variant_of`` this action runs
    (set on each, the primary included, which keeps the action's name)."""
    variant_of: str | None = None

    @property
    def is_llm(self) -> bool:
        return self.kind == "llm"


@dataclass(frozen=True)
class Workflow:
    """A validated workflow; ``actions`` in topological order (file order where free)."""

    name: str
    path: Path
    source_hash: str
    input: InputSpec
    actions: tuple[Action, ...]
    partial_ok: bool = True
    description: str | None = None
    config_hash: str = ""
    budget: Budget | None = None
    """The cap a run admitted from this file gets (R5); not part of ``config_hash``:
    it belongs to the run, like its deadline, and changes no request."""
    deadline: float | None = None
    """Seconds from admission after which a run ends ``timed_out`` (R4)."""
    pilot: PilotSpec | None = None
    """``pilot:`` — a sample run first, and an approval of it with ``approve``
    (config/pilot.py); not part of ``config_hash``, like the budget."""

    def __post_init__(self) -> None:
        if not self.config_hash:
            object.__setattr__(self, "config_hash", _config_hash(self))

    def action(self, name: str) -> Action:
        """The action called ``name``; KeyError when there is none."""
        for action in self.actions:
            if action.name == name:
                return action
        raise KeyError(name)

    @property
    def action_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.actions)

    @property
    def providers(self) -> frozenset[str]:
        """The providers its llm actions, and the judges of their checks, call."""
        found = {a.provider for a in self.actions if a.kind == "llm" and a.provider}
        found |= {c.judge.provider for a in self.actions for c in a.checks if c.judge}
        return frozenset(found)

    def online(self, flex: Callable[[Action], bool] | None = None) -> Workflow:
        """This workflow with every llm action run synchronously (``agac pilot``: a pilot
        never waits for a batch): on ``flex`` where ``flex`` says the action's provider
        sells it for its model (an action already on flex stays), else online. The
        requests, and so their fingerprints, are the same."""
        actions = tuple(
            dataclasses.replace(
                a,
                run_mode="flex"
                if a.run_mode == "flex" or (flex is not None and flex(a))
                else "online",
                flex_fallback_after=a.flex_fallback_after
                if a.run_mode in ("flex", "auto")
                else None,
                poll_interval=None,
                batch_deadline=None,
                live_after=None,
                auto_batch_min_records=None,
                wait_for_cheaper=None,
                auto_choice=None,
            )
            if a.kind == "llm"
            else a
            for a in self.actions
        )
        return dataclasses.replace(self, actions=actions, config_hash="")

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON of the resolved workflow, to be stored with a run."""
        return {
            "version": SNAPSHOT_VERSION,
            "name": self.name,
            "path": str(self.path),
            "source_hash": self.source_hash,
            "config_hash": self.config_hash,
            "description": self.description,
            "partial_ok": self.partial_ok,
            "input": dataclasses.asdict(self.input),
            "actions": [_action_dict(a) for a in self.actions],
            "budget": None if self.budget is None else dataclasses.asdict(self.budget),
            "deadline": self.deadline,
        }

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> Workflow:
        """The workflow ``snapshot()`` described; ValueError for an unknown version."""
        if data.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unsupported workflow snapshot version {data.get('version')!r}")
        return cls(
            name=data["name"],
            path=Path(data["path"]),
            source_hash=data["source_hash"],
            input=InputSpec(**data["input"]),
            actions=tuple(_action_from(a) for a in data["actions"]),
            partial_ok=data["partial_ok"],
            description=data.get("description"),
            config_hash=data["config_hash"],
            budget=Budget(**data["budget"]) if data.get("budget") else None,
            deadline=data.get("deadline"),
        )


def _action_dict(action: Action) -> dict[str, Any]:
    data = dataclasses.asdict(action)
    for key in ("dependencies", "ancestors"):
        data[key] = list(data[key])
    context = data["context"]
    context["observe"] = None if context["observe"] is None else list(context["observe"])
    context["drop"] = list(context["drop"])
    if data.get("effect") is None:
        data.pop("effect", None)  # keeps the config hash of workflows without effects
    # Fan-out keys at their defaults are left out for the same reason.
    for key, default in (
        ("fan_out", None),
        ("join", None),
        ("gate", "parallel"),
        ("failure_policy", "retain_successes"),
    ):
        if data.get(key) == default:
            data.pop(key, None)
    if data.get("code_hash") is None:
        data.pop("code_hash", None)  # likewise for workflows as loaded (and llm actions)
    if data.get("reuse") == "by_record":
        data.pop("reuse", None)  # likewise for tools reused per record (and llm actions)
    if data.get("max_prompt_chars") == DEFAULT_MAX_PROMPT_CHARS:
        data.pop("max_prompt_chars", None)  # likewise for the default cap
    if not data.get("attachments"):
        data.pop("attachments", None)  # likewise for actions without attachments
        data.pop("attachments_position", None)
    else:
        data["attachments"] = list(data["attachments"])
    if data.get("attachment_folders"):
        data["attachment_folders"] = list(data["attachment_folders"])
    else:
        data.pop("attachment_folders", None)  # likewise for actions reading the project only
    if data.get("live_after") is None:
        data.pop("live_after", None)  # likewise for actions without hybrid (B13)
    if data.get("flex_fallback_after") is None:
        data.pop("flex_fallback_after", None)  # likewise for actions without a flex fallback
    for key in ("auto_batch_min_records", "wait_for_cheaper", "auto_choice"):
        if data.get(key) is None:
            data.pop(key, None)  # likewise for actions that are not run_mode: auto
    if data.get("approval") is None:
        data.pop("approval", None)  # likewise for workflows without approvals
    else:
        data["approval"]["approvers"] = list(data["approval"]["approvers"])
    if not data.get("provider_options"):
        data.pop("provider_options", None)  # likewise for actions that set none
    if data.get("checks"):
        data["checks"] = [_check_dict(c) for c in data["checks"]]
    else:
        data.pop("checks", None)  # likewise for actions without checks
    for key, default in _CACHE_DEFAULTS:
        if data.get(key) == default:
            data.pop(key, None)  # likewise for actions that leave prompt caching as it is
    if data.get("tools"):
        # a tool without effect keeps the hash it had before tools could have one
        data["tools"] = [
            {k: v for k, v in t.items() if k != "effect" or v is not None} for t in data["tools"]
        ]
    else:  # likewise for actions without tools (a web search agac runs keeps its bounds)
        data.pop("tools", None)
        for bound, unset in (("max_turns", DEFAULT_MAX_TURNS), ("max_tool_calls", None)):
            if data.get(bound) == unset:
                data.pop(bound, None)
    for key in ("web_search", "variant", "variant_of"):
        if data.get(key) is None:
            data.pop(key, None)  # likewise for actions without web search or variants
    return data


_CACHE_DEFAULTS = (
    ("cache_mode", "auto"),
    ("cache_ttl", "5m"),
    ("context_prefix", None),
    ("context_text", None),
)

_OUTSIDE_HASH = ("line", "cache_mode", "cache_ttl", "context_text", "code_hash")
"""Action fields the config hash leaves out: its line, and what changes the requests sent
but never an answer (decision 0084) — the cache hint, and the rendered ``context_prefix``
(the run keeps its own; the template itself is hashed) — and a tool's code hash, which
decides what is carried, not whether the config changed."""


def _tool_from(data: dict[str, Any]) -> FunctionTool:
    effect = data.get("effect")
    return FunctionTool(**{**data, "effect": EffectSpec(**effect) if effect else None})


def _web_search_from(data: dict[str, Any]) -> WebSearch:
    return WebSearch(
        data.get("max_uses"),
        tuple(data.get("allowed_domains") or ()),
        tuple(data.get("blocked_domains") or ()),
        tuple((str(k), str(v)) for k, v in data.get("user_location") or ()),
    )


def _action_from(data: dict[str, Any]) -> Action:
    values = dict(data)
    values["dependencies"] = tuple(values["dependencies"])
    values["ancestors"] = tuple(values["ancestors"])
    ctx = values["context"]
    values["context"] = ContextSpec(
        None if ctx["observe"] is None else tuple(ctx["observe"]), tuple(ctx["drop"])
    )
    values["retry"] = RetrySpec(**values["retry"])
    if values.get("attachments") is not None:
        values["attachments"] = tuple(values["attachments"])
    if values.get("attachment_folders") is not None:
        values["attachment_folders"] = tuple(values["attachment_folders"])
    if values.get("rate_limit") is not None:
        values["rate_limit"] = RateLimit(**values["rate_limit"])
    if values.get("effect") is not None:
        values["effect"] = EffectSpec(**values["effect"])
    if values.get("fan_out") is not None:
        values["fan_out"] = FanOutSpec(**values["fan_out"])
    if values.get("checks"):
        values["checks"] = tuple(_check_from(c) for c in values["checks"])
    if values.get("tools"):
        values["tools"] = tuple(_tool_from(x) for x in values["tools"])
    if values.get("web_search") is not None:
        values["web_search"] = _web_search_from(values["web_search"])
    if values.get("approval") is not None:
        approval = dict(values["approval"])
        approval["approvers"] = tuple(approval["approvers"])
        values["approval"] = ApprovalSpec(**approval)
    return Action(**values)


def _config_hash(workflow: Workflow) -> str:
    actions = []
    for action in workflow.actions:
        data = _action_dict(action)
        for key in _OUTSIDE_HASH:
            data.pop(key, None)
        actions.append(data)
    source = dataclasses.asdict(workflow.input)
    if not source["records"]:
        del source["records"]  # keeps the config hash of workflows over files
    if source["format"] is None:
        del source["format"]  # keeps the config hash of workflows written before it
    material = {
        "input": source,
        "partial_ok": workflow.partial_ok,
        "actions": actions,
    }
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_dict(check: dict[str, Any]) -> dict[str, Any]:
    """A check as stored: ``judge`` only on a judge (keeps the hash of expression checks)."""
    out = dict(check)
    if out.get("judge") is None:
        out.pop("judge", None)
    return out


def _check_from(data: dict[str, Any]) -> CheckSpec:
    values = dict(data)
    if values.get("judge") is not None:
        values["judge"] = JudgeSpec(**values["judge"])
    return CheckSpec(**values)
