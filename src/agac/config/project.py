"""The project: the folder holding ``agac.yml``, and that file's typed content.

``find_project`` walks up from the working directory to the nearest ``agac.yml``; an
empty file is valid, and with none anywhere the working directory is the root of a
project with an empty configuration (``Project.has_file`` is then False). Every key of
``agac.yml`` is checked: an unknown key is ``unknown_key`` with a did-you-mean hint,
located by file and line, never accepted and ignored.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agac.config.durations import parse_duration
from agac.config.pricewindows import read_windows
from agac.config.source import Findings, Located, did_you_mean, load_located
from agac.config.values import finite, read_mapping, read_number, read_str, read_str_list
from agac.config.variables import POINT_SCHEMES, STORE_HINT, check_variables, store_problem
from agac.errors import ConfigError, Problem, UsageError
from agac.providers.options import Option
from agac.providers.pricing import MAX_PRICE, PRICE_KEYS, PriceWindow
from agac.providers.registry import available_providers, provider_options, provider_transports
from agac.tenants import is_tenant, pick_tenant

__all__ = [
    "IDENTITIES",
    "POINT_SCHEMES",
    "PROJECT_FILE",
    "PriceConfig",
    "Project",
    "ProjectConfig",
    "ProviderConfig",
    "find_project",
    "is_point_url",
    "load_project_config",
    "project_tenant",
    "store_source",
    "store_url",
]

PROJECT_FILE = "agac.yml"

_TOP_KEYS = (
    "store",
    "store_options",
    "object_options",
    "tenant",
    "providers",
    "prices",
    "groups",
    "identity",
)
IDENTITIES = ("local", "login")
"""``identity:`` in agac.yml: ``local`` (the default: the deciding user is ``--as NAME`` or
``AGAC_USER``) or ``login`` (decisions only from users who signed in to ``agac serve``)."""
_PROVIDER_KEYS = ("base_url", "api_key_env", "batch_submissions_per_minute")
#: ``providers.<name>.transport``: how online calls travel (P1), for providers
#: that offer a choice; ``lean`` is the default.
DEFAULT_TRANSPORT = "lean"


@dataclass(frozen=True)
class ProviderConfig:
    """``providers: <name>:`` — connection settings; ``options`` holds provider-specific keys.

    ``transport`` is ``lean`` (agac's own HTTP client for online calls, the default) or
    ``sdk`` (the provider's official SDK); batch and file calls always use the SDK.
    """

    base_url: str | None = None
    api_key_env: str | None = None
    batch_submissions_per_minute: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    transport: str = DEFAULT_TRANSPORT


@dataclass(frozen=True)
class PriceConfig:
    """USD per one million tokens for one ``provider/model``; overrides the bundled table."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    batch_discount: float | None = None
    cache_write_1h: float | None = None
    cache_storage: float | None = None
    """USD per 1M tokens per hour an explicit context cache is kept (Gemini)."""
    windows: tuple[PriceWindow, ...] = ()
    """Hours of the UTC day at other live rates (config/pricewindows.py)."""
    web_search: float | None = None
    """USD per 1,000 searches of the provider's web search, as it bills them."""


@dataclass(frozen=True)
class ProjectConfig:
    """The typed content of ``agac.yml``; every field defaults to "not configured"."""

    store: str | None = None
    providers: Mapping[str, ProviderConfig] = field(default_factory=dict)
    prices: Mapping[str, PriceConfig] = field(default_factory=dict)
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    store_options: Mapping[str, Any] = field(default_factory=dict)
    """``store_options:`` — settings of a storage point (endpoint, region, lease_ttl, …)."""
    tenant: str | None = None
    """``tenant:`` — the tenant commands act in when neither ``--tenant`` nor
    ``AGAC_TENANT`` names one (T2)."""
    identity: str = "local"
    object_options: Mapping[str, Any] = field(default_factory=dict)
    """``object_options:`` — obstore settings of ``s3://``, ``gs://`` and ``az://`` input
    paths and export destinations (endpoint, region, allow_http, …; agac/objectstores.py)."""

    @property
    def login(self) -> bool:
        """``identity: login``: people are users in the store and decide through the service."""
        return self.identity == "login"


@dataclass(frozen=True)
class Project:
    """A project root, its ``agac.yml`` (``path`` None when there is none) and its config."""

    root: Path
    path: Path | None
    config: ProjectConfig = field(default_factory=ProjectConfig)

    @property
    def has_file(self) -> bool:
        return self.path is not None

    def display(self, file: Path) -> str:
        """``file`` relative to the root when inside it (how Problems name files)."""
        try:
            return file.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return str(file)


def find_project(start: Path | None = None) -> Project:
    """The project containing ``start`` (default: the working directory).

    Raises ConfigError with every located Problem when ``agac.yml`` is not valid.
    """
    problems = check_variables()
    if problems:
        raise ConfigError(problems=problems)
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / PROJECT_FILE
        if candidate.is_file():
            return Project(folder, candidate, load_project_config(candidate, PROJECT_FILE))
    return Project(here, None, ProjectConfig())


def load_project_config(path: Path, display: str | None = None) -> ProjectConfig:
    """Parse and check one ``agac.yml``; ConfigError listing all its problems."""
    doc = load_located(path.read_text(encoding="utf-8"), display or str(path))
    config, findings = _parse(doc)
    if findings.errors:
        raise ConfigError(problems=findings.problems)
    return config


def _parse(doc: Located) -> tuple[ProjectConfig, Findings]:
    f = Findings(doc)
    data = doc.data if doc.data is not None else {}
    if read_mapping(f, data, ()) is None:
        return ProjectConfig(), f
    f.unknown_keys(data, _TOP_KEYS, (), "agac.yml")
    store = read_str(f, data["store"], ("store",)) if data.get("store") is not None else None
    if store is not None and (why := store_problem(store)) is not None:
        f.error("invalid_store", f"store: {store!r} {why}", ("store",), hint=STORE_HINT)
        store = None
    tenant = _tenant(f, data.get("tenant"))
    providers = _providers(f, data.get("providers"))
    prices = _prices(f, data.get("prices"))
    groups: dict[str, tuple[str, ...]] = {}
    for name, members in (read_mapping(f, data.get("groups") or {}, ("groups",)) or {}).items():
        users = read_str_list(f, members, ("groups", name))
        if users is not None:
            groups[str(name)] = tuple(users)
    identity = _identity(f, data.get("identity"))
    if identity == "login" and data.get("groups"):
        f.error(
            "groups_with_login",
            "groups: in agac.yml is not used with identity: login: "
            "groups then live in the store only",
            ("groups",),
            hint="remove groups: and give users their groups with "
            "`agac users add NAME --group G` (or `agac users set NAME --group G`)",
        )
    return ProjectConfig(
        store,
        providers,
        prices,
        groups,
        _store_options(f, data),
        tenant,
        identity,
        _store_options(f, data, "object_options"),
    ), f


def _identity(f: Findings, raw: Any) -> str:
    if raw is None:
        return "local"
    value = read_str(f, raw, ("identity",))
    if value is None:
        return "local"
    if value not in IDENTITIES:
        f.error(
            "invalid_identity",
            f"identity: {value!r} is not one of {', '.join(IDENTITIES)}",
            ("identity",),
            hint="identity: login makes people sign in to `agac serve`",
        )
        return "local"
    return value


def _tenant(f: Findings, raw: Any) -> str | None:
    if raw is None:
        return None
    if not is_tenant(raw):
        f.error(
            "invalid_tenant",
            f"tenant {raw!r} is not a tenant name",
            ("tenant",),
            hint="letters, digits, '.', '_' and '-', at most 64 characters, starting with "
            "a letter or digit",
        )
        return None
    return str(raw)


def _store_options(
    f: Findings,
    data: dict[Any, Any],
    name: str = "store_options",
) -> dict[str, Any]:
    """``store_options:`` (or ``object_options:``): a mapping of names to strings, numbers
    or booleans, passed to the storage point (docs/guarantees.md, Storage points) or to the
    object stores of inputs and exports; secrets belong in the environment, not in this
    file."""
    raw = read_mapping(f, data.get(name) or {}, (name,)) or {}
    options: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(value, (str, int, float, bool)) or (
            isinstance(value, float) and not finite(value)
        ):
            f.error(
                "invalid_store",
                f"{name}.{key} must be a string, finite number or boolean, got {value!r}",
                (name, key),
            )
            continue
        options[str(key)] = value
    return options


def _providers(f: Findings, raw: Any) -> dict[str, ProviderConfig]:
    result: dict[str, ProviderConfig] = {}
    mapping = read_mapping(f, raw or {}, ("providers",)) or {}
    known_providers = set(available_providers()) if mapping else set()
    for name, body in mapping.items():
        path = ("providers", name)
        if name not in known_providers:
            f.error(
                "unknown_provider",
                f"unknown provider {name!r} in agac.yml",
                path,
                hint=f"known: {', '.join(sorted(known_providers))}",
            )
        body = read_mapping(f, body or {}, path)
        if body is None:
            continue
        known = name in known_providers
        declared = provider_options(str(name)) if known else ()
        transports = provider_transports(str(name)) if known else ()
        keys = (
            *_PROVIDER_KEYS,
            *(o.name for o in declared),
            *(("transport",) if transports else ()),
        )
        f.unknown_keys(body, keys, path, f"providers.{name}")
        options = {}
        for option in declared:
            if option.name in body:
                value = option_value(f, option, body[option.name], path + (option.name,))
                if value is not None:
                    options[option.name] = value
        rate = body.get("batch_submissions_per_minute")
        result[str(name)] = ProviderConfig(
            base_url=_opt_str(f, body, "base_url", path),
            api_key_env=_opt_str(f, body, "api_key_env", path),
            batch_submissions_per_minute=None
            if rate is None
            else read_number(
                f, rate, path + ("batch_submissions_per_minute",), exclusive_minimum=True
            ),
            options=options,
            transport=_transport(f, body, path, transports),
        )
    return result


def option_value(
    f: Findings, option: Option, value: Any, path: tuple[Any, ...], label: str | None = None
) -> Any:
    """``value`` checked against what the adapter declares and converted for it (seconds
    for a duration), or None after an ``invalid_provider_option`` Problem naming the key
    (``label``, else ``providers.<name>.<key>``)."""
    converted: Any = None
    if option.kind == "seconds":
        with contextlib.suppress(ValueError):
            converted = parse_duration(value, positive=True)
    elif option.kind == "choice":
        converted = value if isinstance(value, str) and value in option.choices else None
    elif option.kind == "text":
        converted = value.strip() if isinstance(value, str) and value.strip() else None
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        converted = None
    elif option.kind == "integer":
        converted = value if isinstance(value, int) and value >= option.minimum else None
    elif (
        math.isfinite(value)
        and (value > option.minimum if option.exclusive_minimum else value >= option.minimum)
        and (option.maximum is None or value <= option.maximum)
    ):
        converted = float(value)
    if converted is None:
        hint = did_you_mean(str(value), option.choices) if option.kind == "choice" else None
        f.error(
            "invalid_provider_option",
            f"{label or f'providers.{path[-2]}.{option.name}'} must be "
            f"{option.describe()}, got {value!r}",
            path,
            hint=hint or option.meaning,
        )
    return converted


def _transport(
    f: Findings, body: dict[Any, Any], path: tuple[Any, ...], transports: tuple[str, ...]
) -> str:
    value = body.get("transport")
    if value is None or not transports:
        return DEFAULT_TRANSPORT
    if value not in transports:
        choices = " or ".join(transports)
        guess = did_you_mean(str(value), transports)
        meaning = "lean: agac's own HTTP client (the default); sdk: the provider's official SDK"
        f.error(
            "invalid_value",
            f"providers.{path[-1]}.transport must be {choices}, got {value!r}",
            path + ("transport",),
            hint=f"{guess} ({meaning})" if guess else meaning,
        )
        return DEFAULT_TRANSPORT
    return str(value)


def _prices(f: Findings, raw: Any) -> dict[str, PriceConfig]:
    result: dict[str, PriceConfig] = {}
    for model, body in (read_mapping(f, raw or {}, ("prices",)) or {}).items():
        path = ("prices", model)
        if not isinstance(model, str) or model.count("/") < 1 or model.startswith("/"):
            f.error("invalid_model", f"price key {model!r} is not provider/model", path)
        body = read_mapping(f, body, path)
        if body is None:
            continue
        f.unknown_keys(body, (*PRICE_KEYS, "windows"), path, f"prices.{model}")
        values: dict[str, float | None] = {}
        for key in PRICE_KEYS:
            if key in body:
                high = 1.0 if key == "batch_discount" else MAX_PRICE
                values[key] = read_number(f, body[key], path + (key,), maximum=high)
        for key in ("input", "output"):
            if key not in body:
                f.error("missing_key", f"prices.{model} needs {key!r} (USD per 1M tokens)", path)
        result[str(model)] = PriceConfig(
            input=values.get("input") or 0.0,
            output=values.get("output") or 0.0,
            cached_input=values.get("cached_input"),
            cache_write=values.get("cache_write"),
            batch_discount=values.get("batch_discount"),
            cache_write_1h=values.get("cache_write_1h"),
            cache_storage=values.get("cache_storage"),
            web_search=values.get("web_search"),
            windows=read_windows(f, body.get("windows"), path + ("windows",), str(model)),
        )
    return result


def _opt_str(f: Findings, body: dict[Any, Any], key: str, path: tuple[Any, ...]) -> str | None:
    return None if body.get(key) is None else read_str(f, body[key], path + (key,))


def project_tenant(
    project: Project, given: str | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """The tenant a command acts in (T2): ``given`` (``--tenant``), else ``AGAC_TENANT``,
    else ``tenant:`` in agac.yml, else ``default``. UsageError naming the source when it
    is not a tenant name (agac.yml's is checked when the file is read: ``invalid_tenant``)."""
    try:
        return pick_tenant(given, project.config.tenant, environ)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def is_point_url(url: str) -> bool:
    """True when ``store:`` names a storage point rather than an SQL store or ``memory``."""
    scheme, sep, _ = url.partition("://")
    return bool(sep) and scheme.lower() in POINT_SCHEMES


def store_url(project: Project, environ: Mapping[str, str] | None = None) -> str:
    """The store URL: ``AGAC_STORE`` wins over ``store:``; default ``.agac/agac.db``.

    ``memory`` stays ``memory``. A SQLite path or a ``dir://`` point starting with ``~``
    is in the home folder; a relative SQLite path (``sqlite:///x.db`` or a bare ``x.db``)
    resolves against the project root; other URLs are returned as written.
    """
    env = os.environ if environ is None else environ
    raw = env.get("AGAC_STORE") or project.config.store
    if raw and (why := store_problem(raw)) is not None:
        where = f"AGAC_STORE={raw!r}" if env.get("AGAC_STORE") else f"store: {raw!r} in agac.yml"
        raise ConfigError(
            problems=[Problem("invalid_store", f"{where} {why}", "environment", hint=STORE_HINT)]
        )
    if not raw:
        return f"sqlite:///{(project.root / '.agac' / 'agac.db').as_posix()}"
    raw = raw.strip()
    if raw == "memory":
        return raw
    if "://" not in raw:
        raw = f"sqlite:///{raw}"
    prefix, sep, rest = raw.partition(":///")
    if prefix.startswith("sqlite") and sep and rest and rest != ":memory:":
        target = _home(Path(rest), raw)
        if not target.is_absolute():
            target = project.root / target
        return f"{prefix}:///{target.as_posix()}"
    scheme, _, place = raw.partition("://")
    if scheme.lower() == "dir" and place.startswith("~"):
        return f"dir://{_home(Path(place), raw).as_posix()}"
    return raw


def _home(path: Path, raw: str) -> Path:
    """``path`` with a leading ``~`` (or ``~user``) as the home folder, never a folder
    named ``~``; ConfigError when there is no home folder to name."""
    if not str(path).startswith("~"):
        return path
    try:
        return path.expanduser()
    except RuntimeError as exc:
        raise ConfigError(
            problems=[
                Problem(
                    "invalid_store",
                    f"the store {raw!r} starts with ~, and the home folder it names cannot "
                    f"be found here ({exc})",
                    "environment",
                    hint="write the store's absolute path",
                )
            ]
        ) from exc


def store_source(project: Project, environ: Mapping[str, str] | None = None) -> str:
    """Where :func:`store_url` found the URL: ``AGAC_STORE``, ``agac.yml`` (its
    ``store:``) or ``default`` (neither is set)."""
    env = os.environ if environ is None else environ
    if env.get("AGAC_STORE"):
        return "AGAC_STORE"
    return "agac.yml" if project.config.store else "default"
