from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agac.config.durations import parse_duration


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (90, 90.0),
        ("90", 90.0),
        ("250ms", 0.25),
        ("30s", 30.0),
        ("5m", 300.0),
        ("25h", 90000.0),
        ("2d", 172800.0),
        (0, 0.0),
        (" 7s ", 7.0),
    ],
)
def test_parse_duration_accepts_seconds_and_units(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["1.5h", "5 minutes", "-3s", -1, True, 2.5, None, "", "s"])
def test_parse_duration_refuses_other_forms(value: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


def test_positive_refuses_zero() -> None:
    with pytest.raises(ValueError, match="greater than zero"):
        parse_duration("0s", positive=True)


UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(sorted(UNITS)))
def test_parse_duration_property(n: int, unit: str) -> None:
    assert parse_duration(f"{n}{unit}") == pytest.approx(n * UNITS[unit])
    assert parse_duration(n) == float(n)


@given(st.text(max_size=8))
def test_parse_duration_never_raises_anything_but_value_error(text: str) -> None:
    try:
        assert parse_duration(text) >= 0
    except ValueError:
        pass
