"""DeepSeek's prices by the hour: a price calendar in the price table. A call is priced at
the window its time falls in (either side of a boundary differs), genai-prices'
time-of-day prices become windows, ``prices:`` declares its own (checked with file and
line), and the plan's helper says when the cheaper hours next open."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agac.config import find_project
from agac.errors import ConfigError
from agac.providers.base import Usage
from agac.providers.pricecalendar import next_cheaper
from agac.providers.pricing import PriceLibrary, PriceTable

MILLION = Usage(1_000_000, 1_000_000)
OFF_PEAK = {
    "deepseek/deepseek-chat": {
        "input": 0.27,
        "output": 1.10,
        "windows": [{"name": "off-peak", "utc": "16:30-00:30", "input": 0.135, "output": 0.55}],
    }
}


def at(hour: int, minute: int, second: int = 0, day: int = 4) -> float:
    return datetime(2026, 12, day, hour, minute, second, tzinfo=UTC).timestamp()


def test_deepseek_calls_either_side_of_a_window_boundary_priced_differently() -> None:
    table = PriceTable(OFF_PEAK)
    model = "deepseek/deepseek-chat"
    before, opened = (
        table.cost(model, MILLION, at=at(16, 29, 59)),
        table.cost(model, MILLION, at=at(16, 30)),
    )
    assert before == pytest.approx(1.37) and opened == pytest.approx(0.685)
    # The window runs past midnight and closes at 00:30.
    assert table.cost(model, MILLION, at=at(0, 29, 59, day=5)) == pytest.approx(0.685)
    assert table.cost(model, MILLION, at=at(0, 30, day=5)) == pytest.approx(1.37)
    # No time given (an estimate): the base rates.
    assert table.cost(model, MILLION) == pytest.approx(1.37)


def test_library_time_of_day_prices_become_windows(tmp_path: Path) -> None:
    """genai-prices prices deepseek-chat by the hour: the base rates are those of the hours
    no window holds, whatever the hour of the lookup, and the window keeps its own."""
    table = PriceTable(library=PriceLibrary(tmp_path / "cache"))
    price = table.get("deepseek/deepseek-chat")
    assert price is not None and price.windows
    peak = price.windows[0]
    inside = at(peak.start // 60, peak.start % 60)
    outside = at(peak.end // 60, peak.end % 60)
    assert table.cost("deepseek/deepseek-chat", MILLION, at=inside) != table.cost(
        "deepseek/deepseek-chat", MILLION, at=outside
    )
    # Read again from the cache file (another process): the same calendar.
    again = PriceTable(library=PriceLibrary(tmp_path / "cache")).get("deepseek/deepseek-chat")
    assert again is not None and again.windows == price.windows


def test_next_cheaper_names_the_window() -> None:
    price = PriceTable(OFF_PEAK).get("deepseek/deepseek-chat")
    assert price is not None
    opening = next_cheaper(price, Usage(1000, 1000), at(12, 0))
    assert opening is not None
    assert (opening.name, opening.hours) == ("off-peak", "16:30-00:30 UTC")
    assert opening.opens_at == at(16, 30) and opening.closes_at == at(0, 30, day=5)
    assert opening.cost_then == pytest.approx(opening.cost_now / 2)
    # Inside the window nothing is cheaper; just after it closes, it opens again at 16:30.
    assert next_cheaper(price, Usage(1000, 1000), at(20, 0)) is None
    later = next_cheaper(price, Usage(1000, 1000), at(0, 31, day=5))
    assert later is not None and later.opens_at == at(16, 30, day=5)


@pytest.mark.parametrize(
    ("window", "code", "line"),
    [
        ('{utc: "25:00-01:00", input: 1, output: 1}', "invalid_value", 6),
        ('{utc: "10:00-10:00", input: 1, output: 1}', "invalid_value", 6),
        ('{utc: "10:00-11:00", output: 1}', "missing_key", 6),
        ('{utc: "10:00-11:00", input: 1, output: 1, discount: 0.5}', "unknown_key", 6),
    ],
)
def test_price_windows_in_agac_yml_are_checked(
    tmp_path: Path, window: str, code: str, line: int
) -> None:
    (tmp_path / "agac.yml").write_text(
        "prices:\n"
        "  deepseek/deepseek-chat:\n"
        "    input: 0.27\n"
        "    output: 1.10\n"
        "    windows:\n"
        f"      - {window}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        find_project(tmp_path)
    found = [(p.code, p.line, p.file) for p in info.value.problems]
    assert (code, line, "agac.yml") in found


def test_price_windows_in_agac_yml_price_the_ledger(tmp_path: Path) -> None:
    (tmp_path / "agac.yml").write_text(
        "prices:\n"
        "  deepseek/deepseek-chat:\n"
        "    input: 0.27\n"
        "    output: 1.10\n"
        "    windows:\n"
        '      - {name: off-peak, utc: "16:30-00:30", input: 0.135, output: 0.55}\n',
        encoding="utf-8",
    )
    config = find_project(tmp_path).config
    table = PriceTable(dict(config.prices))
    assert table.cost("deepseek/deepseek-chat", MILLION, at=at(17, 0)) == pytest.approx(0.685)
    assert table.windows("deepseek/deepseek-chat")[0].label == "off-peak (16:30-00:30 UTC)"
