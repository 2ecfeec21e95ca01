"""The ``web_search`` entry of an llm action's ``tools:``: the provider's own web search.

Written ``web_search`` or ``{web_search: {max_uses, allowed_domains, blocked_domains,
user_location}}``; which options a provider takes is checked against its spec where the
provider is known (config/environment.py). A provider whose search agac runs in the
record's loop (``WebSearchSpec.in_loop``: Ollama) needs the search API's key at
validation (``missing_credentials``, at the line of ``tools:``).
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from agac.config.model import DEFAULT_MAX_TURNS, Action
from agac.config.source import Findings, Path
from agac.config.values import read_int, read_mapping, read_str, read_str_list
from agac.errors import ConfigError
from agac.providers import registry
from agac.providers.servertools import WebSearch
from agac.providers.spec import ProviderSpec, WebSearchSpec

__all__ = [
    "ENTRY",
    "LOCATION_KEYS",
    "WEB_SEARCH_KEYS",
    "check_web_search",
    "is_web_search",
    "read_web_search",
    "runs_loop",
    "searches_in_loop",
]

ENTRY = "web_search"
WEB_SEARCH_KEYS = ("max_uses", "allowed_domains", "blocked_domains", "user_location")
LOCATION_KEYS = ("city", "region", "country", "timezone")


def is_web_search(item: Any) -> bool:
    """A ``tools:`` entry naming the web search (as a string or a key of a mapping)."""
    return item == ENTRY or (isinstance(item, dict) and ENTRY in item)


def read_web_search(f: Findings, item: Any, path: Path) -> WebSearch | None:
    """One ``web_search`` entry, each bad option reported at its line."""
    if isinstance(item, dict) and set(item) != {ENTRY}:
        f.error(
            "invalid_value",
            f"web_search takes its options under it, not beside it: {sorted(item)}",
            path,
            hint="- web_search: {max_uses: 3}",
        )
        return None
    if item == ENTRY or item[ENTRY] is None:
        return WebSearch()
    at = path + (ENTRY,)
    body = read_mapping(f, item[ENTRY], at)
    if body is None:
        return None
    f.unknown_keys(body, frozenset(WEB_SEARCH_KEYS), at, "web_search")
    max_uses = read_int(f, body["max_uses"], at + ("max_uses",)) if "max_uses" in body else None
    allowed = _domains(f, body, "allowed_domains", at)
    blocked = _domains(f, body, "blocked_domains", at)
    if allowed and blocked:
        f.error(
            "invalid_value",
            "web_search takes allowed_domains or blocked_domains, not both",
            at + ("blocked_domains",),
            hint="keep one list: results come only from allowed_domains, or never from "
            "blocked_domains",
        )
        return None
    location = (
        _location(f, body["user_location"], at + ("user_location",))
        if ("user_location" in body)
        else ()
    )
    return WebSearch(max_uses, allowed, blocked, location)


def _bounded(action: Action) -> bool:
    return action.max_turns != DEFAULT_MAX_TURNS or action.max_tool_calls is not None


def _domains(f: Findings, body: dict[Any, Any], key: str, at: Path) -> tuple[str, ...]:
    if key not in body:
        return ()
    found = read_str_list(f, body[key], at + (key,))
    return tuple(found or ())


def _location(f: Findings, value: Any, at: Path) -> tuple[tuple[str, str], ...]:
    body = read_mapping(f, value, at)
    if body is None:
        return ()
    f.unknown_keys(body, frozenset(LOCATION_KEYS), at, "user_location")
    out = []
    for key in LOCATION_KEYS:
        if key in body and (text := read_str(f, body[key], at + (key,))) is not None:
            out.append((key, text))
    return tuple(sorted(out))


@cache
def searches_in_loop(provider: str | None) -> bool:
    """Whether agac runs ``provider``'s web search as a function of the record's loop
    (its spec's ``web_search.in_loop``); False for a provider it cannot load."""
    try:
        spec = registry.provider_spec(provider or "")
    except (ConfigError, ImportError):
        return False
    return spec.web_search is not None and spec.web_search.in_loop


def runs_loop(action: Action) -> bool:
    """Whether an action's units run a tool loop: it has function tools, or a web search
    agac runs (:func:`searches_in_loop`)."""
    return bool(action.tools) or (
        action.web_search is not None and searches_in_loop(action.provider)
    )


def check_web_search(
    f: Findings,
    name: str,
    action: Action,
    spec: ProviderSpec,
    at: Path,
    run_mode_at: Path,
    check_credentials: bool = True,
) -> None:
    """An action's web search against its provider's (``spec.web_search``): a provider or
    model without one, an option it does not take, or a batch that cannot search are
    refused here, each at its line, before anything is sent."""
    search, provider = action.web_search, action.provider
    assert search is not None
    offered = spec.web_search
    if offered is None:
        f.error(
            "web_search_unsupported",
            f"action {name!r} lists web_search, but provider {provider!r} has no web search "
            "agac can offer",
            at,
            hint="use anthropic, openai, gemini or groq (GPT-OSS or Compound) "
            "for this action, or remove web_search",
        )
        return
    model = action.model_name or ""
    offered = offered.for_model(model)
    if not offered.serves(model):
        f.error(
            "web_search_unsupported",
            f"action {name!r} lists web_search, but {provider} model {model!r} cannot search",
            at,
            hint=offered.model_hint or "use a model that searches",
        )
    if action.schema is not None and offered.with_schema and not offered.with_schema(model):
        f.error(
            "web_search_unsupported",
            f"action {name!r} has a schema and lists web_search, but {provider} model "
            f"{model!r} cannot answer in a JSON schema while it searches",
            at,
            hint=offered.schema_hint,
        )
    if action.tools and not offered.with_functions:
        f.error(
            "web_search_unsupported",
            f"action {name!r} lists web_search beside function tools, but {offered.what} "
            "takes no function tools",
            at,
            hint="split the action: one that searches, then one that calls the functions",
        )
    takes_options = offered.options_of(model)
    for option in search.to_dict():
        if option not in takes_options:
            takes = ", ".join(takes_options) or "no options"
            f.error(
                "web_search_unsupported",
                f"action {name!r}: {offered.what} takes {takes}, not {option!r}",
                at,
                hint=f"remove {option} from web_search for provider {provider}",
            )
    if "user_location" in takes_options:
        _check_location(f, name, search, offered, at)
    if not offered.in_loop and not action.tools and _bounded(action):
        f.error(
            "invalid_value",
            f"action {name!r} bounds a tool loop (max_turns, max_tool_calls), but "
            f"{offered.what} searches inside one request: there is no loop to bound",
            at,
            hint="remove max_turns and max_tool_calls, or bound the searches with "
            "web_search: {max_uses: N}",
        )
    if offered.in_loop and any(t.name == ENTRY for t in action.tools):
        f.error(
            "invalid_value",
            f"action {name!r} lists web_search, which the model is offered as a function "
            "named web_search, and a function tool of that name",
            at,
            hint="give the function tool another name: {function: module:name, name: …}",
        )
    keys = offered.key_env
    if check_credentials and keys and not any(os.environ.get(k) for k in keys):
        f.error(
            "missing_credentials",
            f"action {name!r} lists web_search, which {offered.what} answers only with a "
            f"key, and {' or '.join(keys)} is not set",
            at,
            hint=f"set {' or '.join(keys)} (an API key of your {provider} account), or "
            'run against the emulator: eval "$(agac emulator env)"',
        )
    if (
        action.run_mode in ("batch", "auto")
        and spec.batch is not None
        and not offered.batches(model)
    ):
        f.error(
            "web_search_unsupported",
            f"action {name!r} lists web_search and runs in run_mode {action.run_mode}, but "
            f"{offered.what} is online only: {offered.batch_note}",
            run_mode_at,
            hint="run_mode: online for this action",
        )


def _check_location(
    f: Findings, name: str, search: WebSearch, offered: WebSearchSpec, at: Path
) -> None:
    """A ``user_location`` key the provider does not take, or a country code where it
    takes a country's name, refused at the line of ``tools:``."""
    location = dict(search.user_location)
    keys = offered.location_keys
    for key in location:
        if keys is not None and key not in keys:
            f.error(
                "web_search_unsupported",
                f"action {name!r}: {offered.what} takes user_location "
                f"{', '.join(keys)}, not {key!r}",
                at,
                hint=f"remove user_location.{key}",
            )
    country = location.get("country", "")
    if offered.country_names and len(country) <= 3 and country.isupper():
        f.error(
            "web_search_unsupported",
            f"action {name!r}: {offered.what} takes a country's name in user_location, "
            f"not the code {country!r}",
            at,
            hint="write the country's name in lower case: user_location: {country: germany}",
        )
