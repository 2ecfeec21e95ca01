"""A pilot's sample (The quality loop: a pilot before the full run): reproducible from the
keys and the seed alone, split over a field's values in proportion."""

from __future__ import annotations

from agac.data.sampling import NO_VALUE, choose_sample, stratum_of


def _items(n: int, strata: int = 1) -> list[tuple[str, str]]:
    return [(f"k{i}", f"s{i % strata}" if strata > 1 else "") for i in range(n)]


def test_i38_sample_depends_on_keys_and_seed_not_on_order() -> None:
    items = _items(500)
    one = choose_sample(items, 20, seed=1)
    again = choose_sample(list(reversed(items)), 20, seed=1)
    other = choose_sample(items, 20, seed=2)

    assert len(one.keys) == 20 and one.keys == again.keys
    assert one.keys != other.keys
    assert one.population == 500 and one.strata == {"": (500, 20)}


def test_i38_sample_keeps_its_records_when_the_input_grows() -> None:
    small = choose_sample(_items(300), 10, seed=0)
    grown = choose_sample(_items(301), 10, seed=0)
    # One more record can displace at most one of the ten.
    assert len(small.keys & grown.keys) >= 9


def test_i38_sample_of_more_than_the_input_is_the_input() -> None:
    sample = choose_sample(_items(7), 50, seed=0)
    assert sample.keys == {f"k{i}" for i in range(7)}


def test_i38_stratified_sample_is_proportional_with_one_at_least() -> None:
    items = [(f"a{i}", "a") for i in range(90)] + [(f"b{i}", "b") for i in range(9)]
    items += [("c0", "c")]
    sample = choose_sample(items, 10, seed=0)

    assert sample.strata == {"a": (90, 8), "b": (9, 1), "c": (1, 1)}
    assert sum(1 for k in sample.keys if k.startswith("a")) == 8
    assert sample.stratum_of["c0"] == "c"


def test_i38_stratified_sample_smaller_than_its_strata_takes_the_largest() -> None:
    items = [(f"a{i}", "a") for i in range(50)] + [(f"{s}0", s) for s in "bcdef"]
    sample = choose_sample(items, 3, seed=0)
    assert len(sample.keys) == 3
    assert sample.strata["a"] == (50, 3)


def test_i38_stratum_of_reads_a_dotted_field() -> None:
    payload = {"meta": {"lang": "de", "n": 3}, "tags": None}
    assert stratum_of(payload, "meta.lang") == "de"
    assert stratum_of(payload, "meta.n") == "3"
    assert stratum_of(payload, "meta.none") == NO_VALUE
    assert stratum_of(payload, "tags") == NO_VALUE
    assert stratum_of(payload, None) == ""
