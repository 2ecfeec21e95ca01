"""Loading and validating a workflow file (docs/workflow-reference.md).

``load_workflow`` returns the resolved :class:`~agac.config.model.Workflow` or raises
ConfigError carrying every error at once; ``validate_workflow`` returns the workflow
(or None) with every error and warning and never raises for a bad configuration. The
run's own settings (``agac run --run-mode/--poll-interval/--batch-deadline``) are merged
before validation, so what is validated is exactly what would run.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from agac.config.actions import PER_RUN, RawAction, action_fields, merge_action, resolved_run_mode
from agac.config.attachments import check_attachment_folders
from agac.config.caching import check_caching
from agac.config.durations import DURATION_FORMAT, parse_duration
from agac.config.environment import check_environment
from agac.config.fanout import check_fan_outs
from agac.config.graph import order_actions, reachable_dependencies
from agac.config.inputs import check_input
from agac.config.keys import (
    ACTION_KEYS,
    BATCH_TUNING_KEYS,
    BUDGET_KEYS,
    DEFAULTABLE_KEYS,
    FUTURE_ACTION_KEYS,
    FUTURE_KINDS,
    FUTURE_TOP_KEYS,
    INPUT_KEYS,
    KINDS,
    LLM_ONLY_KEYS,
    NOT_IN_DEFAULTS,
    RESERVED_NAMES,
    TOOL_KEYS,
    TOP_KEYS,
)
from agac.config.model import Action, Budget, InputSpec, Workflow
from agac.config.pilot import read_pilot
from agac.config.project import PROJECT_FILE, Project
from agac.config.source import Findings, Located, did_you_mean, load_located
from agac.config.templates import check_check_expressions, check_guard_fields, check_templates
from agac.config.values import (
    finite,
    read_bool,
    read_duration,
    read_int,
    read_mapping,
    read_number,
    read_str,
    read_str_list,
)
from agac.config.variants import expand_variants
from agac.data.formats import FORMATS, known_format
from agac.errors import ConfigError, Problem

__all__ = [
    "find_workflow",
    "load_workflow",
    "validate_workflow",
    "workflow_problems_json",
]

PriceLookup = Callable[[str], bool]
RunDuration = str | int | float | None
"""A per-run duration: seconds, or a duration string (``5m``)."""

_SKIP_DIRS = {"node_modules", "__pycache__", "site-packages", "venv"}
_NAME_LINE = re.compile(r"^name:\s*['\"]?([^'\"#\s]+)", re.MULTILINE)


def load_workflow(
    ref: str | Path,
    project: Project,
    *,
    run_mode: str | None = None,
    poll_interval: RunDuration = None,
    batch_deadline: RunDuration = None,
    price_lookup: PriceLookup | None = None,
    budget_usd: float | None = None,
    records: bool = False,
    kept_prefixes: Mapping[str, str] | None = None,
) -> Workflow:
    """The workflow ``ref`` names; ConfigError with every error Problem when not valid."""
    workflow, problems = validate_workflow(
        ref,
        project,
        run_mode=run_mode,
        poll_interval=poll_interval,
        batch_deadline=batch_deadline,
        price_lookup=price_lookup,
        budget_usd=budget_usd,
        records=records,
        kept_prefixes=kept_prefixes,
    )
    if workflow is None:
        raise ConfigError(problems=[p for p in problems if p.severity == "error"])
    return workflow


def validate_workflow(
    ref: str | Path,
    project: Project,
    *,
    run_mode: str | None = None,
    poll_interval: RunDuration = None,
    batch_deadline: RunDuration = None,
    price_lookup: PriceLookup | None = None,
    check_credentials: bool = True,
    budget_usd: float | None = None,
    sample: int | None = None,
    records: bool = False,
    kept_prefixes: Mapping[str, str] | None = None,
) -> tuple[Workflow | None, list[Problem]]:
    """(the workflow or None when any error, every error and warning sorted by line).

    ``run_mode``, ``poll_interval`` and ``batch_deadline`` are the run's own settings
    (``agac run --run-mode/--poll-interval/--batch-deadline``): seconds or a duration
    string for the tuning. They fill the actions as docs/workflow-reference.md says and are checked like
    written values; the resolved actions record what the run will use.

    ``price_lookup(model)`` tells whether the engine's price table knows a model; a
    model it does not know is the warning ``unpriced_model`` — an error when a budget is
    set. ``budget_usd`` is the run's own cap (``agac run --budget-usd``): it replaces the
    file's ``budget.usd``.

    ``sample``: also check the input against the workflow, reading its first ``sample``
    records (:mod:`agac.config.inputs`; ``agac validate`` does, a run reads its input at
    admission instead).

    ``records``: the caller gives the records (``agac.run(records=…)``), which replace
    ``input.path``: ``input`` and its ``path`` are then optional, and there is no input
    file to sample.

    ``kept_prefixes``: action -> the ``context_prefix`` template whose text the open run
    being continued keeps; it is not rendered again (its files may be gone).
    """
    try:
        path = find_workflow(ref, project)
        data = path.read_bytes()
        doc = load_located(data.decode("utf-8"), project.display(path))
    except ConfigError as exc:
        return None, exc.problems
    except UnicodeDecodeError as exc:
        return None, [Problem("yaml_syntax", f"not UTF-8 text: {exc}", str(ref), 0)]
    f = Findings(doc)
    tuning = _run_tuning(f, {"poll_interval": poll_interval, "batch_deadline": batch_deadline})
    builder = _Builder(
        f,
        doc,
        path,
        project,
        run_mode,
        tuning,
        budget_usd=budget_usd,
        sample=sample,
        records=records,
        kept_prefixes=kept_prefixes,
    )
    workflow = builder.build(hashlib.sha256(data).hexdigest(), price_lookup, check_credentials)
    problems = _unique(sorted(f.problems, key=lambda p: p.line))
    if any(p.severity == "error" for p in problems):
        workflow = None
    return workflow, problems


def _run_tuning(f: Findings, given: dict[str, RunDuration]) -> dict[str, float]:
    """The run's batch tuning in seconds; ``invalid_poll_interval`` /
    ``invalid_batch_deadline`` (line 0: not in the file) for a value that is not a
    positive duration."""
    tuning = {}
    for key, value in given.items():
        if value is None:
            continue
        flag = PER_RUN[key][0]
        try:
            tuning[key] = _positive_seconds(value)
        except ValueError as exc:
            f.error(
                f"invalid_{key}",
                f"{flag}: {exc}",
                (flag,),
                line=0,
                hint=f"{flag} takes {DURATION_FORMAT}",
            )
    return tuning


def _positive_seconds(value: str | float) -> float:
    if isinstance(value, float):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{value!r} must be a positive number of seconds")
        return value
    return parse_duration(value, positive=True)


def workflow_problems_json(problems: list[Problem]) -> dict[str, Any]:
    """The object ``agac validate --json`` prints: ``{"ok", "errors", "warnings"}``."""
    errors = [p.to_dict() for p in problems if p.severity == "error"]
    warnings = [p.to_dict() for p in problems if p.severity != "error"]
    return {"ok": not errors, "errors": errors, "warnings": warnings}


def find_workflow(ref: str | Path, project: Project) -> Path:
    """The file ``ref`` names: a path (relative to the working directory or the project
    root), else the ``name:`` (or file stem) of a ``*.yml``/``*.yaml`` in the project.
    ConfigError ``workflow_not_found`` or ``ambiguous_workflow`` otherwise."""
    ref_path = Path(ref)
    for candidate in (ref_path, project.root / ref_path):
        if candidate.is_file():
            return candidate.resolve()
    name = str(ref)
    candidates = _workflow_files(project.root, deep=project.has_file)
    matches = [p for p in candidates if _workflow_name(p) == name]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ConfigError(
            problems=[
                Problem(
                    "workflow_not_found",
                    f"no workflow file or workflow named {name!r} in project {project.root}"
                    if project.has_file
                    else f"no workflow file or workflow named {name!r} in {project.root} "
                    f"(not in an agac project: no {PROJECT_FILE} here or above, so only "
                    "this folder's own files were searched)",
                    name,
                    0,
                    hint="name a .yml file or a workflow's name:"
                    if project.has_file
                    else "name the .yml file, run from the project's folder, or `agac init` one",
                )
            ]
        )
    files = ", ".join(project.display(p) for p in matches)
    raise ConfigError(
        problems=[
            Problem(
                "ambiguous_workflow",
                f"several workflows are named {name!r}: {files}",
                name,
                0,
                hint="name the file instead",
            )
        ]
    )


def _workflow_files(root: Path, *, deep: bool = True) -> Iterator[Path]:
    """The candidate workflow files under ``root``: every subfolder in a project (``deep``);
    outside one only the folder's own files — a bare ``agac run NAME`` in a home folder
    never walks the whole tree."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        if not deep:
            dirs[:] = []
        for file in sorted(files):
            if file.endswith((".yml", ".yaml")) and not (
                folder == str(root) and file == "agac.yml"
            ):
                yield Path(folder, file)


MAX_CANDIDATE_BYTES = 16 * 1024 * 1024
"""A ``*.yml`` larger than this is not a candidate when a workflow is looked up by name."""
_HEAD_BYTES = 1024 * 1024
"""How much of a candidate is read to find its ``name:`` and ``actions:``."""


def _workflow_name(path: Path) -> str | None:
    """The workflow name of ``path``, or None when it is not a workflow file. Only regular
    files of at most MAX_CANDIDATE_BYTES are candidates — a FIFO named ``x.yml`` (which
    would block the lookup) or a link to ``/dev/zero`` (endless) never is — and only
    their first megabyte is read."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CANDIDATE_BYTES:
            return None
        with path.open("rb") as handle:
            text = handle.read(_HEAD_BYTES).decode("utf-8", errors="ignore")
    except OSError:
        return None
    if not re.search(r"^actions\s*:", text, re.MULTILINE):
        return None
    match = _NAME_LINE.search(text)
    return match.group(1) if match else path.stem


def _likely_kind(body: dict[Any, Any]) -> str:
    """The kind an action with a bad ``kind:`` most likely means: the closest spelling,
    else what its keys say (``function`` is a tool's), else llm."""
    close = difflib.get_close_matches(str(body.get("kind")), sorted(KINDS), n=1, cutoff=0.6)
    if close:
        return close[0]
    return "tool" if "function" in body else "llm"


def _unique(problems: list[Problem]) -> list[Problem]:
    seen: set[tuple[str, str, int, str]] = set()
    result = []
    for p in problems:
        key = (p.code, p.file, p.line, p.message)
        if key not in seen:
            seen.add(key)
            result.append(p)
    return result


class _Builder:
    """One validation pass over one document."""

    def __init__(
        self,
        f: Findings,
        doc: Located,
        path: Path,
        project: Project,
        run_mode: str | None,
        tuning: dict[str, float],
        *,
        budget_usd: float | None = None,
        sample: int | None = None,
        records: bool = False,
        kept_prefixes: Mapping[str, str] | None = None,
    ) -> None:
        self.f, self.doc, self.path, self.project = f, doc, path, project
        self.kept_prefixes = kept_prefixes
        self.run_mode, self.tuning = run_mode, tuning
        self.budget_usd = budget_usd
        self.sample = sample
        self.records = records
        self.budget: Budget | None = None

    def build(
        self, source_hash: str, price_lookup: PriceLookup | None, check_credentials: bool
    ) -> Workflow | None:
        f, data = self.f, self.doc.data
        if not isinstance(data, dict):
            f.error("invalid_value", "a workflow file must be a mapping with input and actions", ())
            return None
        self._top_keys(data)
        name = read_str(f, data["name"], ("name",)) if "name" in data else self.path.stem
        description = data.get("description")
        if description is not None:
            description = read_str(f, description, ("description",), nonempty=False)
        partial_ok = (
            read_bool(f, data["partial_ok"], ("partial_ok",)) if "partial_ok" in data else True
        )
        input_spec = self._input(data)
        self.budget = self._budget(data)
        deadline = (
            read_duration(f, data["deadline"], ("deadline",), code="invalid_deadline")
            if data.get("deadline") is not None
            else None
        )
        pilot = read_pilot(f, data["pilot"]) if data.get("pilot") is not None else None
        defaults = self._defaults(data)
        raws = self._actions(data, defaults)
        self._unused_tuning(raws)
        actions = self._resolve(raws, price_lookup, check_credentials, deadline)
        if input_spec is not None and self.sample and not input_spec.records:
            check_input(f, self.project, input_spec, raws, self.sample)
        if f.errors or actions is None or input_spec is None or name is None:
            return None
        return Workflow(
            name=name,
            path=self.path,
            source_hash=source_hash,
            input=input_spec,
            actions=actions,
            partial_ok=bool(partial_ok),
            description=description,
            budget=self.budget,
            deadline=deadline,
            pilot=pilot,
        )

    def _budget(self, data: dict[Any, Any]) -> Budget | None:
        """``budget: {usd, tokens}`` (R5), with the run's ``--budget-usd`` in place of usd."""
        f = self.f
        usd: float | None = None
        tokens: int | None = None
        if data.get("budget") is not None:
            body = read_mapping(f, data["budget"], ("budget",))
            if body is not None:
                f.unknown_keys(body, BUDGET_KEYS, ("budget",), "budget")
                if not body.keys() & BUDGET_KEYS:
                    f.error(
                        "invalid_value",
                        "budget needs usd or tokens",
                        ("budget",),
                        hint="budget: {usd: 20}",
                    )
                if body.get("usd") is not None:
                    usd = read_number(f, body["usd"], ("budget", "usd"), exclusive_minimum=True)
                if body.get("tokens") is not None:
                    tokens = read_int(f, body["tokens"], ("budget", "tokens"))
        if self.budget_usd is not None:
            if not (
                isinstance(self.budget_usd, (int, float))
                and finite(self.budget_usd)
                and self.budget_usd > 0
            ):
                f.error(
                    "invalid_value",
                    f"--budget-usd must be a positive finite number, got {self.budget_usd!r}",
                    ("--budget-usd",),
                    line=0,
                )
            else:
                usd = float(self.budget_usd)
        if usd is None and tokens is None:
            return None
        return Budget(usd=usd, tokens=tokens)

    def _top_keys(self, data: dict[Any, Any]) -> None:
        for key in data:
            if key in FUTURE_TOP_KEYS:
                self.f.error(
                    "not_available_yet",
                    f"{key!r} is not available in this version of agac",
                    (key,),
                    hint="remove it",
                )
            elif key not in TOP_KEYS:
                self.f.error(
                    "unknown_key",
                    f"unknown top-level key {key!r}",
                    (key,),
                    hint=did_you_mean(key, TOP_KEYS | FUTURE_TOP_KEYS),
                )

    def _input(self, data: dict[Any, Any]) -> InputSpec | None:
        f = self.f
        if "input" not in data and self.records:
            return InputSpec("", None, records=True)
        if "input" not in data:
            f.error(
                "missing_key",
                "the workflow has no 'input'",
                (),
                hint="input: {path: data/records.jsonl}",
            )
            return None
        body = read_mapping(f, data["input"], ("input",))
        if body is None:
            return None
        f.unknown_keys(body, INPUT_KEYS, ("input",), "input")
        if self.records:  # the records given replace input.path
            id_field = body.get("id_field")
            if id_field is not None:
                id_field = read_str(f, id_field, ("input", "id_field"))
            return InputSpec("", id_field, records=True)
        if "path" not in body:
            f.error(
                "missing_key",
                "input has no 'path'",
                ("input",),
                hint="a file, a folder or a glob relative to the project root",
            )
            return None
        path = read_str(f, body["path"], ("input", "path"))
        id_field = body.get("id_field")
        if id_field is not None:
            id_field = read_str(f, id_field, ("input", "id_field"))
        fmt = self._input_format(body)
        return None if path is None else InputSpec(path, id_field, format=fmt)

    def _input_format(self, body: dict[Any, Any]) -> str | None:
        """``input.format:``, lower-case (``feather`` is ``arrow``); None when unset."""
        if body.get("format") is None:
            return None
        value = read_str(self.f, body["format"], ("input", "format"))
        if value is None:
            return None
        if not known_format(value):
            self.f.error(
                "unsupported_input",
                f"input.format {value!r} is not one agac reads",
                ("input", "format"),
                hint=did_you_mean(value, FORMATS) or "one of " + ", ".join(FORMATS),
            )
            return None
        return value.lower()

    def _defaults(self, data: dict[Any, Any]) -> dict[Any, Any]:
        f = self.f
        if data.get("defaults") is None:
            return {}
        body = read_mapping(f, data["defaults"], ("defaults",))
        if body is None:
            return {}
        kept = {}
        for key, value in body.items():
            path = ("defaults", key)
            if key in FUTURE_ACTION_KEYS - NOT_IN_DEFAULTS:
                f.error(
                    "not_available_yet",
                    f"{key!r} is not available in this version of agac",
                    path,
                    hint="remove it",
                )
            elif key in NOT_IN_DEFAULTS:
                f.error(
                    "unknown_key", f"{key!r} cannot be set in defaults; set it on each action", path
                )
            elif key not in DEFAULTABLE_KEYS:
                f.error(
                    "unknown_key",
                    f"unknown key {key!r} in defaults",
                    path,
                    hint=did_you_mean(key, DEFAULTABLE_KEYS),
                )
            else:
                kept[key] = value
        return kept

    def _actions(self, data: dict[Any, Any], defaults: dict[Any, Any]) -> list[RawAction]:
        f = self.f
        if "actions" not in data:
            f.error("missing_key", "the workflow has no 'actions'", ())
            return []
        items = data["actions"]
        if not isinstance(items, list) or not items:
            f.error("invalid_value", "actions must be a non-empty list", ("actions",))
            return []
        raws = []
        for index, item in enumerate(items):
            raw = self._action(index, item)
            if raw is None:
                continue
            for one in expand_variants(f, raw, self.doc.line):
                merge_action(one, defaults, self.run_mode, self.tuning)
                raws.append(one)
        return raws

    def _hybrid_deadline(
        self, raws: list[RawAction], actions: list[Action], deadline: float | None
    ) -> None:
        """B13: ``hybrid`` goes live before the run's ``deadline``, so it needs one, and
        ``live_after`` must come before it."""
        where = {r.name: r.origin("hybrid") + ("live_after",) for r in raws}
        for action in actions:
            if action.live_after is None:
                continue
            if deadline is None:
                self.f.error(
                    "hybrid_needs_deadline",
                    f"action {action.name!r} has hybrid, but the workflow has no deadline",
                    where[action.name],
                    hint="add a top-level deadline: (e.g. deadline: 24h) that "
                    "live_after comes before",
                )
            elif action.live_after >= deadline:
                self.f.error(
                    "invalid_hybrid",
                    f"live_after of action {action.name!r} "
                    f"({action.live_after:g}s) is not before the workflow's deadline "
                    f"({deadline:g}s)",
                    where[action.name],
                    hint="live_after must be shorter than deadline",
                )

    def _unused_tuning(self, raws: list[RawAction]) -> None:
        """Warn when the run's tuning fills nothing: no action ends up (or may end up) batched."""
        if not self.tuning or any(
            r.kind == "llm" and resolved_run_mode(r.values.get("run_mode")) in ("batch", "auto")
            for r in raws
        ):
            return
        for key in self.tuning:
            flag = PER_RUN[key][0]
            self.f.warn(
                "tuning_without_batch",
                f"{flag} is given, but no action of this workflow runs in batch mode",
                (flag,),
                line=0,
                hint="it fills batch actions only; add --run-mode batch or drop it",
            )

    def _action(self, index: int, item: Any) -> RawAction | None:
        f, path = self.f, ("actions", index)
        body = read_mapping(f, item, path)
        if body is None:
            return None
        self._action_keys(body, path)
        name = body.get("name")
        if name is None:
            f.error("missing_key", f"action #{index + 1} has no 'name'", path)
            return None
        if not isinstance(name, str) or not name.isidentifier() or name in RESERVED_NAMES:
            f.error(
                "invalid_value",
                f"action name {name!r} must be an identifier (letters, "
                "digits, _) and not a reserved word like 'source'",
                path + ("name",),
            )
            return None
        deps = (
            read_str_list(
                f, body.get("dependencies") or [], path + ("dependencies",), allow_single=True
            )
            or []
        )
        own = {k: v for k, v in body.items() if k in ACTION_KEYS - {"name", "kind", "dependencies"}}
        # A bad kind is reported, and the action is still checked (as the kind it most
        # likely means) and stays known to the actions that depend on it.
        kind = self._kind(body, path) or _likely_kind(body)
        raw = RawAction(index, name, kind, path, self.doc.line(path), deps, own)
        if kind == "tool":
            self._tool_keys(raw)
        elif kind == "join":
            self._join_keys(raw)
        return raw

    def _action_keys(self, body: dict[Any, Any], path: tuple[Any, ...]) -> None:
        for key in body:
            if key in FUTURE_ACTION_KEYS:
                self.f.error(
                    "not_available_yet",
                    f"{key!r} is not available in this version of agac",
                    path + (key,),
                    hint="remove it",
                )
            elif key not in ACTION_KEYS:
                self.f.error(
                    "unknown_key",
                    f"unknown key {key!r} in action",
                    path + (key,),
                    hint=did_you_mean(key, ACTION_KEYS | FUTURE_ACTION_KEYS),
                )

    def _kind(self, body: dict[Any, Any], path: tuple[Any, ...]) -> str | None:
        kind = body.get("kind", "llm")
        if kind in KINDS:
            return str(kind)
        if kind in FUTURE_KINDS:
            self.f.error(
                "not_available_yet",
                f"kind {kind!r} is not available in this version of agac",
                path + ("kind",),
            )
        else:
            self.f.error(
                "invalid_value",
                f"kind {kind!r} is not one of llm, tool, join",
                path + ("kind",),
                hint=did_you_mean(str(kind), KINDS),
            )
        return None

    def _tool_keys(self, raw: RawAction) -> None:
        for key in raw.own:
            if key in LLM_ONLY_KEYS - TOOL_KEYS:
                what = "batch tuning" if key in BATCH_TUNING_KEYS else f"{key!r}"
                self.f.error(
                    "not_an_llm_action",
                    f"{what} is set on tool action {raw.name!r}; it applies to llm actions only",
                    raw.path + (key,),
                    hint=f"remove {key!r} from this action",
                )
        if "function" not in raw.own:
            self.f.error(
                "missing_key",
                f"tool action {raw.name!r} has no 'function'",
                raw.path,
                hint="function: module:name (resolved from the project root)",
            )

    def _join_keys(self, raw: RawAction) -> None:
        for key in raw.own:
            if key in LLM_ONLY_KEYS:
                what = "batch tuning" if key in BATCH_TUNING_KEYS else f"{key!r}"
                self.f.error(
                    "not_an_llm_action",
                    f"{what} is set on join action {raw.name!r}; "
                    "a kind: join collects items and calls nothing",
                    raw.path + (key,),
                    hint="to call a model at the join, make it an "
                    "llm action with join: FAN_OUT_ACTION",
                )
            elif key in ("function", "fan_out", "effect"):
                self.f.error(
                    "invalid_value",
                    f"{key!r} is set on join action {raw.name!r}; a kind: join only collects items",
                    raw.path + (key,),
                    hint="make it kind: tool with join: FAN_OUT_ACTION",
                )

    def _resolve(
        self,
        raws: list[RawAction],
        price_lookup: PriceLookup | None,
        check_credentials: bool,
        deadline: float | None,
    ) -> tuple[Action, ...] | None:
        f = self.f
        fields = {}
        for raw in raws:
            fields[raw.name] = action_fields(f, raw)
            if isinstance(fields[raw.name].get("schema"), dict):
                fields[raw.name]["schema"] = self._bundled(raw, fields[raw.name]["schema"])
            self._required(raw)
        ordered = order_actions(f, raws)
        visible: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
        if ordered is not None:
            order, ancestors = ordered
            visible = check_fan_outs(self.f, order, ancestors, fields)
        else:  # a cycle: no order, but templates are still checked against what they reach
            order, ancestors = raws, reachable_dependencies(raws)
        self._check_templates(order, ancestors, fields, visible)
        for raw in order:
            check_caching(f, self.project, raw, fields[raw.name], self.kept_prefixes)
        check_attachment_folders(f, self.project, order)
        built = [self._action_of(r, fields[r.name], ancestors.get(r.name, ())) for r in order]
        self._hybrid_deadline(raws, built, deadline)
        check_environment(
            f,
            self.project,
            zip(order, built),
            price_lookup=price_lookup,
            check_credentials=check_credentials,
            budget=self.budget is not None,
        )
        return tuple(built) if not f.errors else None

    def _bundled(self, raw: RawAction, schema: dict[str, Any]) -> dict[str, Any] | None:
        """The schema with its ``$ref``s resolved once, here (X2)."""
        from agac.config.schemarefs import bundle_schema  # imports referencing: schemas only

        return bundle_schema(self.f, schema, raw.origin("schema"), self.project.root)

    def _check_templates(
        self,
        order: list[RawAction],
        ancestors: dict[str, tuple[str, ...]],
        fields: dict[str, dict[str, Any]],
        visible: dict[str, tuple[tuple[str, ...], frozenset[str]]],
    ) -> None:
        names = [r.name for r in order]
        outputs = {r.name: (r.kind, fields[r.name].get("schema")) for r in order}
        for raw in order:
            seen, extra = visible.get(raw.name, (ancestors[raw.name], frozenset()))
            refs = check_templates(self.f, raw, seen, fields[raw.name]["context"], names, extra)
            if "when" in refs:
                check_guard_fields(self.f, raw, refs["when"], {a: outputs[a] for a in seen})
            checks = fields[raw.name].get("checks")
            if checks:
                check_check_expressions(
                    self.f,
                    raw.name,
                    checks,
                    raw.origin("checks"),
                    fields[raw.name].get("schema"),
                    seen,
                    {a: outputs[a] for a in seen},
                )

    def _required(self, raw: RawAction) -> None:
        if raw.kind == "llm":
            for key in ("model", "prompt"):
                if key not in raw.values:
                    self.f.error(
                        "missing_key",
                        f"llm action {raw.name!r} has no {key!r} (on the action or in defaults)",
                        raw.path,
                    )
            if "function" in raw.own:
                self.f.error(
                    "invalid_value",
                    f"'function' is for kind: tool, but action {raw.name!r} is an llm action",
                    raw.path + ("function",),
                    hint="add kind: tool",
                )

    def _action_of(
        self, raw: RawAction, fields: dict[str, Any], ancestors: tuple[str, ...]
    ) -> Action:
        return Action(
            name=raw.name,
            kind=raw.kind,
            line=raw.line,
            dependencies=tuple(dict.fromkeys(raw.dependencies)),
            ancestors=ancestors,
            **fields,
        )
