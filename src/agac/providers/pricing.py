"""Prices and the cost of a call (docs/cli.md, agac cost): never a silent $0.

Prices are USD per million tokens, looked up by ``provider/model``, first in a project's
``prices:`` in agac.yml, then in the maintained price library genai-prices (offline
data, ~2,300 models, batch and cache prices; Gemini's provider id there is ``google``).
``mock/*``, ``ollama/*`` and ``vllm/*`` (local) cost 0. Any other model is *unpriced*: its calls
cost 0 in the ledger, ``agac run`` and ``agac validate`` warn at start, ``agac cost``
marks it, and a budget on it is refused (``unpriced_model``) unless agac.yml prices it.

Batch: the library's batch price where it has one; else a project's ``batch_discount``;
else half the live price, marked *derived* in ``agac cost``. On Groq prompt caching does
not stack with the batch discount, so cached reads in a derived Groq batch are billed as
ordinary input; on Vertex AI a batch's cache hit is billed at the live cache rate.
Long-context tiers (a higher rate past an input threshold, as Anthropic and Gemini price)
are kept.

agac's usage counts input *excluding* cached reads and cache writes (docs/providers.md); the
threshold of a tier is judged on the whole input, as genai-prices does.

A price calendar: a model may cost more or less at some hours of the day (DeepSeek's
off-peak discount, its peak-hour surcharge). A :class:`PriceWindow` holds the live rates
of a daily UTC interval; a call is priced at the window its time falls in (the ledger
passes when the answer came, :attr:`Price.windows`), else at the model's base rates.
genai-prices' time-of-day prices become windows; ``prices:`` may declare its own
(``windows: [{utc: "16:30-00:30", input: …, output: …}]``).

Explicit context caches (Gemini ``cachedContents``) are billed for their storage too: USD
per million tokens per hour the cache is kept. genai-prices has no such field, so agac
keeps Gemini's published storage prices (:data:`CACHE_STORAGE`); a project's
``cache_storage`` in ``prices:`` wins.

Importing genai-prices costs about a third of a second (its data, pydantic), more than
``agac validate`` may spend starting. So the prices of a model are extracted once and
kept in a small JSON file per genai-prices data version under the user's cache
directory (``$AGAC_CACHE_DIR``, else ``$XDG_CACHE_HOME/agac``, else ``~/.cache/agac``);
later lookups of that model read only the file. The library is imported on a miss.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agac.errors import ConfigError, Problem
from agac.providers import registry
from agac.providers._price_extract import LIBRARY_PROVIDER, cache_home, extract, library_version
from agac.providers.base import Usage
from agac.providers.toolprices import project_tools

__all__ = [
    "MAX_PRICE",
    "PRICE_KEYS",
    "Price",
    "PriceLibrary",
    "PriceTable",
    "PriceWindow",
    "Rates",
    "cost_usd",
    "default_library",
    "flex_rate",
    "hours_of",
    "known_models",
]

MAX_PRICE = 1_000_000_000.0
"""The largest price agac takes (USD per million tokens, per million tokens and hour of
cache storage, or per use): far above any real price, and small enough that any cost it
makes stays a finite float (a price such as ``1e308`` overflows a cost to infinity, and ``0 × inf`` is NaN)."""

FREE_PROVIDERS = frozenset({"mock", "ollama", "vllm"})
"""Offline and local models: they cost nothing."""
CACHE_OVER_BATCH = frozenset({"vertex"})
"""Batch discount and cache hit do not stack: a batch's cached tokens at the live cache rate."""
CACHE_STORAGE: tuple[tuple[str, float], ...] = (
    ("gemini/gemini-2.5-flash", 1.00),  # Flash and Flash-Lite
    ("gemini/gemini-2.5-pro", 4.50),
    ("gemini/gemini-2.0-flash", 1.00),
)
"""USD per 1M tokens per hour of an explicit context cache, by model name prefix
(Gemini's published prices); a project's ``prices.<model>.cache_storage`` wins."""


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per million tokens; cached reads and cache writes default to the input rate,
    1-hour cache writes to twice the input rate (Anthropic's price for them, the only
    provider that writes them).
    ``tools`` is USD per use of a provider's server tool (``web_search``, …); a tool it
    does not name is unpriced (its uses cost 0 here and are marked by ``agac cost``)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    tools: tuple[tuple[str, float], ...] = ()
    cache_write_1h: float | None = None

    def cost(self, usage: Usage, *, cached_as_input: bool = False) -> float:
        cached = self.input if cached_as_input or self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        hour = 2 * self.input if self.cache_write_1h is None else self.cache_write_1h
        # Reasoning tokens are a part of output_tokens: billed once, as output; 1-hour
        # writes are a part of cache_write_tokens: what they cost above a write is added.
        tokens = (
            usage.input_tokens * self.input
            + usage.cached_tokens * cached
            + usage.cache_write_tokens * write
            + usage.output_tokens * self.output
            + usage.cache_write_1h_tokens * (hour - write)
        ) / 1_000_000
        return tokens + self.tool_cost(usage)

    def tool_cost(self, usage: Usage) -> float:
        """USD of the server-tool uses of ``usage`` alone (billed per use, never
        discounted with the tokens)."""
        if not usage.server_tools:
            return 0.0
        per_use = dict(self.tools)
        return sum(n * per_use.get(name, 0.0) for name, n in usage.server_tools)


@dataclass(frozen=True, slots=True)
class PriceWindow:
    """The live rates of a daily interval, ``start`` to ``end`` in minutes of the UTC day
    (``end`` before ``start``: it runs past midnight); ``name`` is what ``agac plan``
    calls it (``16:30-00:30 UTC`` when none is given)."""

    start: int
    end: int
    live: Rates
    name: str = ""

    def holds(self, minute: int) -> bool:
        if self.end <= self.start:
            return minute >= self.start or minute < self.end
        return self.start <= minute < self.end

    @property
    def hours(self) -> str:
        """``HH:MM-HH:MM UTC``."""
        return f"{_clock(self.start)}-{_clock(self.end)} UTC"

    @property
    def label(self) -> str:
        return f"{self.name} ({self.hours})" if self.name else self.hours


def _clock(minute: int) -> str:
    return f"{minute // 60 % 24:02d}:{minute % 60:02d}"


def minute_of_day(at: float) -> int:
    """The minute of the UTC day of epoch time ``at``."""
    return int(at // 60) % 1440


@dataclass(frozen=True, slots=True)
class Price:
    """A model's prices: live, batch (None: not known), long-context tiers, and where they
    come from (``agac.yml``, ``genai-prices``, ``free``)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    batch_discount: float | None = None
    """A project's discount of the batch tier (0-1); wins over a derived half."""
    cache_write_1h: float | None = None
    """1-hour cache writes (Anthropic ``cache_ttl: 1h``); None: twice the input rate."""
    cache_storage: float | None = None
    """A project's USD per 1M tokens per hour of an explicit context cache."""
    batch: Rates | None = None
    tiers: tuple[tuple[int, Rates, Rates | None], ...] = ()
    """(input tokens above which, live rates, batch rates), lowest threshold first."""
    source: str = "agac.yml"

    tools: tuple[tuple[str, float], ...] = ()
    """USD per use of each server tool the price knows (live)."""
    windows: tuple[PriceWindow, ...] = ()
    """Hours of the day at other live rates (a price calendar); the last one holding a
    call's time wins."""

    def live_at(self, at: float | None) -> Rates:
        """The live rates of a call made at epoch time ``at`` (None: the base rates)."""
        if at is not None and self.windows:
            minute = minute_of_day(at)
            for window in reversed(self.windows):
                if window.holds(minute):
                    return window.live
        return self.live

    @property
    def live(self) -> Rates:
        return Rates(
            self.input,
            self.output,
            self.cached_input,
            self.cache_write,
            self.tools,
            self.cache_write_1h,
        )

    @property
    def batch_derived(self) -> bool:
        """True when a batch call is priced at half the live price for want of a batch price."""
        return self.source != "free" and self.batch is None and self.batch_discount is None


FREE = Price(0.0, 0.0, 0.0, 0.0, batch=Rates(0.0, 0.0, 0.0, 0.0), source="free")


def cost_usd(
    price: Price,
    usage: Usage,
    tier: str = "live",
    provider: str = "",
    calls: int = 1,
    at: float | None = None,
) -> float:
    """USD for ``usage`` at ``price`` (the batch tier at the batch price, or derived).

    ``usage`` may be the sum of ``calls`` calls: a long-context tier is chosen per call,
    by the calls' average input, so the sum of many short calls is priced as short calls
    (give sums of calls that fall in the same tier: :meth:`Store.usage_totals` bands).
    ``at``: when the call was made (epoch seconds), for a price with windows."""
    live, batch = price.live_at(at), price.batch
    if price.tiers:
        total_in = (usage.input_tokens + usage.cached_tokens + usage.cache_write_tokens) / max(
            calls, 1
        )
        for above, tier_live, tier_batch in price.tiers:
            if total_in > above:
                live, batch = tier_live, tier_batch
    if tier != "batch":
        return live.cost(usage)
    factor = 1.0 - price.batch_discount if price.batch_discount is not None else 0.5
    hits = 0.0
    if provider in CACHE_OVER_BATCH and usage.cached_tokens:
        hits = live.cost(Usage(cached_tokens=usage.cached_tokens))
        usage = replace(usage, cached_tokens=0)
    if batch is not None:
        return hits + batch.cost(usage)
    # Groq: prompt caching does not stack with the batch discount; a server tool's fee
    # per use is not discounted (Anthropic's and Gemini's batch prices keep it).
    tokens = replace(usage, server_tools=())
    return (
        hits
        + live.cost(tokens, cached_as_input=provider == "groq") * factor
        + live.tool_cost(usage)
    )


def flex_rate(provider: str) -> str:
    """The tier whose rates a flex call of ``provider`` is billed at, as its spec says:
    ``batch`` (OpenAI, Azure, Gemini: the batch discount on a live call) or ``live``
    (Groq, which sells higher rate limits at the on-demand price)."""
    try:
        flex = registry.provider_spec(provider).flex
    except (ConfigError, ImportError):
        return "live"
    return "batch" if flex is not None and flex.billed == "batch" else "live"


_COSTS_KEPT = 4096
"""How many costs a :class:`PriceTable` remembers."""


class PriceTable:
    """A project's ``prices:`` over the price library; mock and local models are free.
    A tier is ``live``, ``batch`` or ``flex`` (billed at the rate of :func:`flex_rate`)."""

    def __init__(
        self, overrides: Mapping[str, Any] | None = None, library: PriceLibrary | None = None
    ) -> None:
        self._overrides = {
            model: _coerce(model, value) for model, value in (overrides or {}).items()
        }
        self._library = library
        self._memo: dict[str, Price | None] = {}
        self._at: float | None = None
        self._costs: dict[tuple[str, Usage, str, int, float | None], float] = {}
        """What :meth:`cost` gave each (model, usage, tier, calls, time) asked again: a
        batch of answers repeats a few usages many times (bounded: cleared when full)."""

    def at_time(self, now: float) -> PriceTable:
        """This table pricing every call it is not told the time of at ``now`` (an
        estimate made now: ``agac plan``); the same prices otherwise."""
        view = PriceTable.__new__(PriceTable)
        view._overrides, view._library, view._memo = self._overrides, self._library, self._memo
        view._at = now
        view._costs = {}
        return view

    def get(self, model: str) -> Price | None:
        try:
            return self._memo[model]
        except KeyError:
            pass
        price = self._overrides.get(model)
        provider, _, name = model.partition("/")
        if price is None and provider in FREE_PROVIDERS:
            price = FREE
        if price is None and name:
            price = (self._library or default_library()).lookup(provider, name)
        self._memo[model] = price
        return price

    def known(self, model: str) -> bool:
        return self.get(model) is not None

    def cost(
        self,
        model: str,
        usage: Usage,
        tier: str = "live",
        calls: int = 1,
        at: float | None = None,
    ) -> float:
        """USD for ``usage``, the sum of ``calls`` calls of ``model`` made at epoch time
        ``at`` (None: at the base rates; see :func:`cost_usd`)."""
        when = at if at is not None else self._at
        key = (model, usage, tier, calls, when)
        found = self._costs.get(key)
        if found is not None:
            return found
        price = self.get(model)
        if price is None or price is FREE:
            return 0.0
        provider = model.partition("/")[0]
        cost = cost_usd(
            price,
            usage,
            flex_rate(provider) if tier == "flex" else tier,
            provider=provider,
            calls=calls,
            at=when,
        )
        if len(self._costs) >= _COSTS_KEPT:
            self._costs.clear()
        self._costs[key] = cost
        return cost

    def windows(self, model: str) -> tuple[PriceWindow, ...]:
        """The hours of the day ``model`` costs otherwise (its price calendar)."""
        price = self.get(model)
        return price.windows if price is not None else ()

    def thresholds(self, models: Iterable[str]) -> tuple[int, ...]:
        """Every long-context threshold (input tokens per call) of these models' prices,
        lowest first: what the ledger's totals are banded by to price each band's calls
        at their own tier."""
        found = {above for m in models if (p := self.get(m)) is not None for above, _, _ in p.tiers}
        return tuple(sorted(found))

    def storage(self, model: str) -> float | None:
        """USD per 1M tokens per hour an explicit context cache of ``model`` is kept: the
        project's ``cache_storage``, else :data:`CACHE_STORAGE`; 0 for free models, None
        when unknown (the storage is then counted $0 and marked unpriced)."""
        price = self._overrides.get(model)
        if price is not None and price.cache_storage is not None:
            return price.cache_storage
        if model.partition("/")[0] in FREE_PROVIDERS:
            return 0.0
        return next((usd for prefix, usd in CACHE_STORAGE if model.startswith(prefix)), None)

    def storage_cost(self, model: str, tokens: int, seconds: float) -> float:
        """USD of keeping ``tokens`` in an explicit cache of ``model`` for ``seconds``."""
        usd = self.storage(model) or 0.0
        return tokens * max(0.0, seconds) / 3600.0 * usd / 1_000_000

    def unpriced_tools(self, model: str, tools: list[str] | tuple[str, ...]) -> list[str]:
        """The server tools of ``tools`` the model's price does not know (their uses cost 0
        in the ledger: marked ``unpriced`` by ``agac cost``). None for free models."""
        price = self.get(model)
        if price is FREE:
            return []
        known = {name for name, _ in price.tools} if price is not None else set()
        return sorted(t for t in tools if t not in known)

    def status(self, model: str, tier: str = "live") -> str | None:
        """``unpriced`` (no price: its cost shows as 0), ``derived`` (a batch call, or a
        flex call billed at the batch rate, at half the live price), or None."""
        price = self.get(model)
        if price is None:
            return "unpriced"
        if tier == "flex":
            tier = flex_rate(model.partition("/")[0])
        if tier == "batch" and price.batch_derived:
            return "derived"
        return None


PRICE_KEYS = (
    "input",
    "output",
    "cached_input",
    "cache_write",
    "cache_write_1h",
    "batch_discount",
    "cache_storage",
    "web_search",
)
"""The keys of a model's price in ``agac.yml``'s ``prices:`` (USD per 1M tokens; a
discount from 0 to 1; storage per 1M tokens per hour; ``web_search``: USD per 1,000
searches of the provider's web search, as billed)."""


def _coerce(model: str, value: Any) -> Price:
    """A project's price of ``model``; ConfigError when a number in it is not finite or
    above :data:`MAX_PRICE` (a price of ``.inf`` or ``1e308`` would make a cost, a budget
    check and a ledger row of the model infinite or NaN)."""
    if isinstance(value, Price):
        return value
    data = value if isinstance(value, Mapping) else {k: getattr(value, k, None) for k in PRICE_KEYS}
    for key in PRICE_KEYS:
        number = data.get(key)
        if number is not None and not _bounded(number):
            raise ConfigError(
                problems=[
                    Problem(
                        "invalid_value",
                        f"prices.{model}.{key} must be a finite number from 0 to "
                        f"{MAX_PRICE:,.0f}, got {number!r}",
                        file="agac.yml",
                        path=f"prices.{model}.{key}",
                    )
                ]
            )
    windows = data.get("windows") if isinstance(value, Mapping) else getattr(value, "windows", ())
    return Price(
        input=float(data.get("input") or 0.0),
        output=float(data.get("output") or 0.0),
        cached_input=_opt(data.get("cached_input")),
        cache_write=_opt(data.get("cache_write")),
        cache_write_1h=_opt(data.get("cache_write_1h")),
        batch_discount=_opt(data.get("batch_discount")),
        cache_storage=_opt(data.get("cache_storage")),
        tools=project_tools(data.get("web_search"), model),
        windows=tuple(_window(model, w) for w in windows or ()),
        source="agac.yml",
    )


def _window(model: str, value: Any) -> PriceWindow:
    """A project's price window: a :class:`PriceWindow`, or a mapping with ``utc``
    (``HH:MM-HH:MM``), ``input`` and ``output`` and optionally ``cached_input``,
    ``cache_write`` and ``name``."""
    if isinstance(value, PriceWindow):
        return value
    hours = hours_of(str(value.get("utc") or ""))
    if hours is None:
        raise ConfigError(
            problems=[
                Problem(
                    "invalid_value",
                    f"prices.{model}.windows: utc must be HH:MM-HH:MM (UTC), got "
                    f"{value.get('utc')!r}",
                    file="agac.yml",
                    hint='e.g. utc: "16:30-00:30"',
                )
            ]
        )
    start, end = hours
    return PriceWindow(
        start,
        end,
        Rates(
            float(value.get("input") or 0.0),
            float(value.get("output") or 0.0),
            _opt(value.get("cached_input")),
            _opt(value.get("cache_write")),
        ),
        str(value.get("name") or ""),
    )


def hours_of(text: str) -> tuple[int, int] | None:
    """``HH:MM-HH:MM`` (UTC) as (start, end) minutes of the day; None when it is not
    that, or the window is empty."""
    found = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*", text)
    if not found:
        return None
    h1, m1, h2, m2 = (int(g) for g in found.groups())
    if h1 > 24 or h2 > 24 or m1 > 59 or m2 > 59:
        return None
    start, end = (h1 * 60 + m1) % 1440, (h2 * 60 + m2) % 1440
    return (start, end) if start != end else None


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


def _bounded(number: Any) -> bool:
    try:
        value = float(number)
    except (TypeError, ValueError, OverflowError):
        return False
    return math.isfinite(value) and 0.0 <= value <= MAX_PRICE


# -- the price library ------------------------------------------------------------------------


class PriceLibrary:
    """Prices from genai-prices, kept per model in a JSON file per data version."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir
        self._lock = threading.Lock()
        self._entries: dict[str, Any] | None = None
        self._file: Path | None = None
        self._version: str | None = None

    def lookup(self, provider: str, model: str) -> Price | None:
        key = f"{provider}/{model}"
        with self._lock:
            entries = self._load()
            if key not in entries:
                entries[key] = extract(provider, model)
                self._save(entries)
            entry = entries[key]
        return _price_from_json(entry) if entry is not None else None

    def _load(self) -> dict[str, Any]:
        if self._entries is None:
            self._entries = {}
            path = self._path()
            if path is not None:
                try:
                    data = json.loads(path.read_text(encoding="utf-8"))
                    if isinstance(data, dict):
                        self._entries = data
                except (OSError, ValueError):
                    pass
        return self._entries

    def _save(self, entries: dict[str, Any]) -> None:
        path = self._path()
        if path is None:
            return
        try:  # a cache: any failure only costs the next process a lookup
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".prices-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entries, f, separators=(",", ":"), sort_keys=True)
            os.replace(tmp, path)
        except OSError:
            return

    def _path(self) -> Path | None:
        if self._file is None:
            version = library_version()
            if version is None:
                return None
            base = self._cache_dir or cache_home()
            # "6": entries carry agac's web search and page visit fees (Groq's; older
            # files lack them).
            self._file = base / f"prices-6-{version}.json"
        return self._file


_DEFAULT: PriceLibrary | None = None


def default_library() -> PriceLibrary:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = PriceLibrary()
    return _DEFAULT


def known_models(provider: str) -> list[str]:
    """The model names the price library knows for ``provider`` (agac's name), for a
    did-you-mean on a misspelt model; empty when the library is not installed. Imports
    genai-prices: only called for a model it could not price."""
    try:
        from genai_prices.data import providers
    except ImportError:
        return []
    pid = LIBRARY_PROVIDER.get(provider, provider)
    return sorted(m.id for p in providers if p.id == pid for m in p.models)


def _price_from_json(entry: dict[str, Any]) -> Price:
    live, batch = entry["live"], entry.get("batch")
    thresholds = sorted(
        {
            above
            for rates in (live, batch or {})
            for v in rates.values()
            if isinstance(v, list)
            for above, _ in v[1]
        }
    )

    def rates(raw: dict[str, Any], above: int | None) -> Rates:
        def at(key: str) -> float | None:
            v = raw.get(key)
            if not isinstance(v, list):
                return None if v is None else float(v)
            price = float(v[0])
            for start, p in v[1]:
                if above is not None and above >= start:
                    price = float(p)
            return price

        tools = tuple(sorted((str(k), float(v)) for k, v in (raw.get("tools") or {}).items()))
        return Rates(
            at("input_mtok") or 0.0,
            at("output_mtok") or 0.0,
            at("cache_read_mtok"),
            at("cache_write_mtok"),
            tools,
            at("cache_write_1h_mtok"),
        )

    base = rates(live, None)
    windows = tuple(
        PriceWindow(int(w["start"]), int(w["end"]), rates(w["live"], None))
        for w in entry.get("windows") or ()
    )
    return Price(
        base.input,
        base.output,
        base.cached_input,
        base.cache_write,
        tools=base.tools,
        cache_write_1h=base.cache_write_1h,
        batch=rates(batch, None) if batch else None,
        tiers=tuple(
            (above, rates(live, above), rates(batch, above) if batch else None)
            for above in thresholds
        ),
        windows=windows,
        source="genai-prices",
    )
