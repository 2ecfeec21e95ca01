"""Issue "Providers, part 3", Bedrock's records per job: a file is split into batch parts
only where the provider's limits require it, and no part falls below the provider's
minimum — the parts before a short last one give it requests, and what still makes no
batch within the limits is returned apart (sent live or held), never sent as a job the
provider would refuse."""

from __future__ import annotations

import random

from agac.engine.batch.split import LINE_OVERHEAD, split_parts


def _ids(n: int, size: int = 100) -> list[tuple[str, int]]:
    return [(f"r{i:06d}", size) for i in range(n)]


def _counts(n: int, most: int, least: int) -> tuple[list[int], int]:
    split = split_parts(_ids(n), most=most, max_bytes=10**12, least=least)
    return [len(p) for p in split.parts], len(split.short)


def test_i41_split_by_max_records_last_job_lifted_to_the_minimum() -> None:
    """Bedrock's quotas as configured (at most 500 a job): 1,050 records go as 500, 450
    and 100 — the job before the last gives it 50 rather than leave it at 50."""
    assert _counts(1050, 500, 100) == ([500, 450, 100], 0)
    assert _counts(1000, 500, 100) == ([500, 500], 0)
    assert _counts(120_000, 50_000, 100) == ([50_000, 50_000, 20_000], 0)


def test_i41_max_below_twice_the_minimum_rebalances_every_job_before() -> None:
    """At most 120 a job and at least 100: 530 records cut greedily would leave 50; no
    single job before can spare 50, so each gives what it can, nearest first."""
    assert _counts(530, 120, 100) == ([120, 110, 100, 100, 100], 0)


def test_i41_remainder_that_makes_no_job_is_returned_apart() -> None:
    """250 records at 100 to 120 a job make no set of jobs: two jobs of 120 go, the 10
    left are returned apart (the engine sends them live or holds them)."""
    split = split_parts(_ids(250), most=120, max_bytes=10**12, least=100)
    assert [len(p) for p in split.parts] == [120, 120]
    assert split.short == [f"r{i:06d}" for i in range(240, 250)]


def test_i41_file_below_the_minimum_is_all_short() -> None:
    split = split_parts(_ids(40), most=50_000, max_bytes=10**12, least=100)
    assert split.parts == [] and len(split.short) == 40
    assert split_parts(_ids(0), most=10, max_bytes=10**9, least=100) == split_parts(
        [], most=10, max_bytes=10**9
    )


def test_i41_lifting_never_breaks_the_byte_limit() -> None:
    """Parts cut by their bytes: the job before could spare 50 requests by count, but
    with them the last job would go over the byte limit — its requests are returned apart
    rather than sent as a job Bedrock would refuse for its size or its count."""
    light = [(f"a{i:04d}", 100) for i in range(300)]  # 400 bytes a line
    heavy = [(f"b{i:04d}", 2200) for i in range(54)]  # 2,500 bytes a line
    split = split_parts(light + heavy, most=50_000, max_bytes=130_000, least=100)
    assert [len(p) for p in split.parts] == [304]  # 300 light and 4 heavy: 130,000 bytes
    assert split.short == [c for c, _ in heavy[4:]]
    lifted = split_parts(light + heavy, most=50_000, max_bytes=160_000, least=100)
    assert [len(p) for p in lifted.parts] == [254, 100] and not lifted.short


def test_i41_parts_are_runs_every_request_once_none_below_minimum() -> None:
    """Over many shapes (counts, sizes, limits): every request in exactly one part or in
    the short ones, each part a run of consecutive requests within every limit and at
    least the minimum; by count alone, nothing is short exactly when some number of jobs
    can hold the file."""
    rng = random.Random(41)
    for _ in range(400):
        n = rng.randint(0, 2000)
        least = rng.randint(1, 150)
        most = rng.randint(least, 400)
        by_count = rng.random() < 0.5
        sizes = [(f"r{i:06d}", 100 if by_count else rng.randint(10, 4000)) for i in range(n)]
        max_bytes = 10**12 if by_count else rng.randint(4300, 300_000)
        split = split_parts(sizes, most=most, max_bytes=max_bytes, least=least)
        order = [custom_id for custom_id, _ in sizes]
        where = {custom_id: i for i, custom_id in enumerate(order)}
        seen = [c for p in split.parts for c in p] + split.short
        assert sorted(seen) == order
        length = dict(sizes)
        for part in split.parts:
            assert least <= len(part) <= most
            assert sum(length[c] + LINE_OVERHEAD for c in part) <= max_bytes
            assert [where[c] for c in part] == list(range(where[part[0]], where[part[-1]] + 1))
        if by_count:
            feasible = n == 0 or any(k * least <= n <= k * most for k in range(1, n + 1))
            assert (not split.short) == feasible, (n, least, most)
