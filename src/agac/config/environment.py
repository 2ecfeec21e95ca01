"""Checks of a workflow against the machine and the project, before anything is sent.

Providers (``unknown_provider``, ``provider_not_installed``, ``missing_credentials``,
``batch_unsupported`` for a batch action on a provider without a batch API,
``flex_unsupported`` for a flex action on a provider or model without a flex tier,
``attachment_not_supported`` for attachments to a provider or model that takes none), tool functions and an llm action's function tools (``invalid_function``; ``invalid_schema`` when
a tool's arguments cannot be described), durability (``not_durable``, and
``secret_not_durable`` for approvals on a storage point without ``AGAC_SECRET``) and prices
(``unpriced_model``). Each provider is judged once, at the first action using it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable

from agac.config.actions import CLI, RawAction
from agac.config.functions import FunctionNotFound, resolve_function
from agac.config.model import Action, FunctionTool
from agac.config.project import Project, is_point_url, option_value, store_url
from agac.config.source import Findings, did_you_mean
from agac.config.websearch import check_web_search
from agac.errors import ConfigError
from agac.installing import install_hint
from agac.providers import registry
from agac.providers.pricing import known_models
from agac.providers.spec import ProviderSpec
from agac.tools.signature import SignatureError, signature_of

__all__ = ["check_environment"]

PriceLookup = Callable[[str], bool]


def check_environment(
    f: Findings,
    project: Project,
    pairs: Iterable[tuple[RawAction, Action]],
    *,
    price_lookup: PriceLookup | None = None,
    check_credentials: bool = True,
    budget: bool = False,
) -> None:
    """Report what would stop this workflow on this machine, or cost unknown money.

    With a ``budget`` a model without a price is an error: the cap could not be kept."""
    seen_providers: dict[str, ProviderSpec | None] = {}
    seen_models: set[str] = set()
    memory = store_url(project) == "memory"
    point = is_point_url(store_url(project)) and not os.environ.get("AGAC_SECRET")
    for raw, action in pairs:
        if action.kind == "tool" and action.function:
            _check_function(f, project, raw, action.function)
        if action.effect is not None and action.effect.compensate:
            _check_function(f, project, raw, action.effect.compensate)
        for n, tool in enumerate(action.tools):
            _check_tool(f, project, raw, tool, n)
            if tool.effect is not None and tool.effect.compensate:
                _check_function(f, project, raw, tool.effect.compensate)
        if memory and "approval" in raw.own:
            f.error(
                "not_durable",
                f"action {raw.name!r} needs approvals, which a memory store cannot keep",
                raw.path + ("approval",),
                hint="use the default SQLite store or PostgreSQL",
            )
        if point and action.approval is not None:
            f.error(
                "secret_not_durable",
                f"action {raw.name!r} needs approvals, which are signed "
                f"with the project secret; on the storage point {store_url(project)} the "
                "generated .agac/secret would die with this machine",
                raw.path + ("approval",),
                hint="set AGAC_SECRET to the same secret on every machine that runs or "
                "decides (e.g. from your secret manager)",
            )
        if action.approval is not None:
            _check_approvers(f, project, raw, action.approval.approvers)
        if action.kind != "llm" or action.provider is None or action.model is None:
            continue
        if memory and action.run_mode == "batch":
            f.error(
                "not_durable",
                f"action {raw.name!r} runs in batch mode, which a memory store cannot resume",
                raw.origin("run_mode"),
                hint="use the default SQLite store or PostgreSQL",
            )
        if action.provider not in seen_providers:
            seen_providers[action.provider] = _check_provider(
                f, project, raw, action.provider, check_credentials
            )
        spec = seen_providers[action.provider]
        if action.run_mode == "batch" and spec is not None and spec.batch_support == "none":
            _batch_unsupported(f, raw, action.provider)
        if (
            action.run_mode == "flex"
            and spec is not None
            and not spec.flex_serves(action.model_name or "")
        ):
            _flex_unsupported(f, raw, action, spec)
        if action.attachments and spec is not None:
            _attachments_unsupported(f, raw, action, spec)
        if action.provider_options and spec is not None:
            _check_request_options(f, raw, action, spec)
        if action.tools and spec is not None and not spec.function_tools:
            f.error(
                "not_available_yet",
                f"action {raw.name!r} has tools, but a tool loop on provider "
                f"{action.provider!r} is not available in this version of agac",
                raw.origin("tools"),
                hint="use a provider that speaks a tool protocol (openai, azure, groq, "
                "deepseek, anthropic, gemini, ollama) for this action",
            )
        if action.tools and spec is not None and spec.function_tools:
            _batch_tools_unsupported(f, raw, action, spec)
        if action.web_search is not None and spec is not None:
            check_web_search(
                f,
                raw.name,
                action,
                spec,
                raw.origin("tools"),
                raw.origin("run_mode"),
                check_credentials,
            )
        if action.model not in seen_models:
            seen_models.add(action.model)
            _check_price(f, project, raw, action, price_lookup, budget)


def _batch_tools_unsupported(
    f: Findings, raw: RawAction, action: Action, spec: ProviderSpec
) -> None:
    """An action with tools that may go to a batch API whose results agac does not read
    tool calls from (its loop runs in batch rounds only where it does)."""
    if action.run_mode not in ("batch", "auto") or spec.batch is None or spec.batch.tools:
        return
    f.error(
        "not_available_yet",
        f"action {raw.name!r} has tools and run_mode {action.run_mode}, but a tool loop in "
        f"batch rounds on provider {action.provider!r} is not available in this version of agac",
        raw.origin("run_mode"),
        hint="run_mode: online, or a provider whose batches run tool loops (openai, azure, "
        "groq, anthropic, gemini)",
    )


def _check_request_options(f: Findings, raw: RawAction, action: Action, spec: ProviderSpec) -> None:
    """An action's ``provider_options:`` against its provider's ``request_options``: a key
    it does not declare is ``unknown_key`` (with a "did you mean"), a value it does not
    take ``invalid_provider_option`` naming the key."""
    where = raw.origin("provider_options")
    declared = {o.name: o for o in spec.request_options}
    label = f"provider_options of action {raw.name!r} (provider {spec.name})"
    f.unknown_keys(action.provider_options, declared, where, label)
    for key, value in action.provider_options.items():
        if key in declared:
            option_value(
                f,
                declared[key],
                value,
                where + (key,),
                f"provider_options.{key} of action {raw.name!r}",
            )


def _check_approvers(
    f: Findings, project: Project, raw: RawAction, approvers: tuple[str, ...]
) -> None:
    """A1: every approver is a group of ``agac.yml`` or a user listed in one. A project
    without ``groups:`` names its users directly, so there is nothing to check them
    against."""
    groups = project.config.groups
    if not groups:
        return
    users = {u for members in groups.values() for u in members}
    for i, name in enumerate(approvers):
        if name in groups or name in users:
            continue
        f.error(
            "unknown_approver",
            f"approver {name!r} of action {raw.name!r} is neither a "
            "group of agac.yml nor a user listed in one",
            raw.origin("approval") + ("approvers", i),
            hint=did_you_mean(name, set(groups) | users)
            or f"groups: {', '.join(sorted(groups))}; add {name!r} to one of them",
        )


def _check_provider(
    f: Findings, project: Project, raw: RawAction, provider: str, check_credentials: bool
) -> ProviderSpec | None:
    """Judge the provider of ``raw``'s model; its spec when its adapter could be loaded."""
    where = raw.origin("model")
    try:
        spec = registry.provider_spec(provider)
    except ConfigError as exc:
        if provider in registry.available_providers():  # a plugin without a valid spec
            for problem in exc.problems:
                f.error(problem.code, problem.message, where, hint=problem.hint)
            return None
        f.error(
            "unknown_provider",
            f"unknown provider {provider!r} in model of action {raw.name!r}",
            where,
            hint=did_you_mean(provider, registry.available_providers())
            or f"known: {', '.join(registry.available_providers())}",
        )
        return None
    except ImportError as exc:
        if (exc.name or "").startswith("agac"):
            return None  # the adapter module itself is missing from this build: nothing to judge
        f.error(
            "provider_not_installed",
            f"provider {provider!r} cannot be loaded: {exc}",
            where,
            hint=install_hint(provider),
        )
        return None
    if not registry.sdk_installed(spec):
        f.error(
            "provider_not_installed",
            f"the SDK of provider {provider!r} is not installed",
            where,
            hint=install_hint(spec.extra or provider),
        )
        return spec
    _check_credentials(f, project, raw, provider, spec, check_credentials)
    return spec


def _batch_unsupported(f: Findings, raw: RawAction, provider: str) -> None:
    """A batch action on a provider without a batch API would run live, at the live price,
    with no word: refused. (Ollama declares ``local_batch`` and is not refused.)"""
    source = "--run-mode batch" if raw.origins.get("run_mode") == CLI else "run_mode: batch"
    f.error(
        "batch_unsupported",
        f"action {raw.name!r} runs in batch mode ({source}), but "
        f"provider {provider!r} has no batch API",
        raw.origin("run_mode"),
        hint=f"run action {raw.name!r} online (run_mode: online), or use a provider with "
        f"a batch API ({', '.join(registry.batch_providers())})",
    )


def _flex_unsupported(f: Findings, raw: RawAction, action: Action, spec: ProviderSpec) -> None:
    """A flex action on a provider without a flex tier, or with a model it does not serve
    on it, would be refused by the provider or — worse — served at the standard price
    with no word: refused here, naming the model."""
    source = "--run-mode flex" if raw.origins.get("run_mode") == CLI else "run_mode: flex"
    sellers = ", ".join(registry.flex_providers())
    if spec.flex is None:
        why = f"provider {spec.name!r} has no flex tier"
        hint = f"run action {raw.name!r} online or in batch, or use a provider with a flex tier ({sellers})"
    else:
        why = f"{spec.name} does not serve model {action.model_name!r} on its flex tier"
        hint = f"use a model {spec.name} serves on flex (docs/providers.md, Tiers), or run_mode: online"
    f.error(
        "flex_unsupported",
        f"action {raw.name!r} runs on the flex tier ({source}) with model {action.model!r}, "
        f"but {why}",
        raw.origin("run_mode"),
        hint=hint,
    )


def _attachments_unsupported(
    f: Findings, raw: RawAction, action: Action, spec: ProviderSpec
) -> None:
    """An action with ``attachments:`` on a provider or model that takes no files at all is
    refused here, before anything is sent; a kind that only some files are (a PDF to a
    provider that reads images) is judged on the sample and, at run time, per unit."""
    limits = spec.attachments
    model = action.model_name or ""
    why = None
    if limits is None or not limits.kinds:
        why = f"provider {action.provider!r} takes no attachments (model {model})"
    elif all(limits.refusal(action.provider or "", model, k) for k in limits.kinds):
        why = limits.refusal(action.provider or "", model, min(limits.kinds))
    if why is not None:
        f.error(
            "attachment_not_supported",
            f"action {raw.name!r} attaches files, but {why}",
            raw.origin("attachments"),
            hint="use a model that reads images and PDFs "
            "(docs/providers.md lists what each provider takes)",
        )


def _check_credentials(
    f: Findings,
    project: Project,
    raw: RawAction,
    provider: str,
    spec: ProviderSpec,
    check_credentials: bool,
) -> None:
    where = raw.origin("model")
    if check_credentials:
        missing = _missing_credentials(project, provider, spec)
        if missing:
            f.error(
                "missing_credentials",
                f"no API key for provider {provider!r}",
                where,
                hint=f"set {' or '.join(missing)}, or run against the emulator: "
                'eval "$(agac emulator env)"',
            )


def _missing_credentials(project: Project, provider: str, spec: ProviderSpec) -> list[str]:
    settings = project.config.providers.get(provider)
    if settings is not None and settings.api_key_env:
        return [] if os.environ.get(settings.api_key_env) else [settings.api_key_env]
    return registry.credentials_missing(spec, None)


def _check_function(f: Findings, project: Project, raw: RawAction, spec: str) -> None:
    try:
        resolve_function(spec, project.root)
    except FunctionNotFound as exc:
        f.error(
            "invalid_function",
            f"function of action {raw.name!r}: {exc}",
            raw.origin("function"),
            hint=f"it is imported from the project root {project.root}",
        )


def similar_model(model: str) -> str | None:
    """The priced ``provider/model`` closest to a model the price table does not know."""
    provider, _, name = model.partition("/")
    if not name:
        return None
    close = difflib.get_close_matches(name, known_models(provider), n=1, cutoff=0.8)
    return f"{provider}/{close[0]}" if close else None


def _check_tool(f: Findings, project: Project, raw: RawAction, tool: FunctionTool, n: int) -> None:
    """A function tool imports, and what the model is told about it can be worked out."""
    where = raw.origin("tools") + (n,)
    try:
        fn = resolve_function(tool.function, project.root)
    except FunctionNotFound as exc:
        f.error(
            "invalid_function",
            f"tool {tool.name!r} of action {raw.name!r}: {exc}",
            where,
            hint=f"it is imported from the project root {project.root}",
        )
        return
    if tool.schema is not None:
        return
    try:
        signature_of(fn, f"tool {tool.name!r} of action {raw.name!r}")
    except SignatureError as exc:
        f.error(
            "invalid_schema",
            str(exc),
            where,
            hint="give the arguments' JSON Schema: - {function: "
            f"{tool.function}, schema: {{type: object, properties: {{…}}}}}}",
        )


def _check_price(
    f: Findings,
    project: Project,
    raw: RawAction,
    action: Action,
    price_lookup: PriceLookup | None,
    budget: bool = False,
) -> None:
    model = action.model or ""
    if action.provider == "mock" or model in project.config.prices or price_lookup is None:
        return
    if price_lookup(model):
        return
    hint = f"add prices: {{{model}: {{input: …, output: …}}}} to agac.yml (USD per million tokens)"
    close = similar_model(model)
    if close is not None:
        hint = f"did you mean {close!r}? (a model of the price table); else {hint}"
    if budget:
        f.error(
            "unpriced_model",
            f"model {model!r} has no known price, so the workflow's budget cannot be kept",
            raw.origin("model"),
            hint=hint,
        )
    else:
        f.warn(
            "unpriced_model",
            f"model {model!r} has no known price: its calls count $0 in "
            "the ledger and `agac cost` marks them unpriced",
            raw.origin("model"),
            hint=hint,
        )
