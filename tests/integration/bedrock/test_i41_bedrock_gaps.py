"""Issue "Providers, part 3" items for Bedrock that the other suites left open, against the
emulator's control plane and runtime and moto's S3 over loopback: the input object is
deleted once a job has ended however it ended (Failed, Expired, Stopped,
PartiallyCompleted), the AWS credential chain and region read the way AWS users set them
(a named profile in ``~/.aws``, the ``region:`` option over the environment), and the
1 GB limit of a job's input file as the byte limit files are split by."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bedrock_support import BUCKET, MODEL, ROLE, requests

from agac.engine.batch.split import LINE_OVERHEAD, split_parts
from agac.errors import BatchNotEnded
from agac.providers.base import Message, ProviderSettings, Request, batch_api
from agac.providers.bedrock import MAX_FILE_BYTES, BedrockProvider, job_name


def _input_key(prefix: str, key: str) -> str:
    folder = prefix.split(f"{BUCKET}/", 1)[1]
    return f"{folder}/{job_name(key)}/input/records.jsonl"


def _exists(s3: Any, key: str) -> bool:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=key)
    return any(o["Key"] == key for o in listed.get("Contents") or ())


@pytest.mark.parametrize(
    ("fault", "status"),
    [
        ({"batch_end": "failed"}, "Failed"),
        ({"batch_end": "expired"}, "Expired"),
        ({"batch_end": "expired", "answered": 40}, "PartiallyCompleted"),
        (None, "Stopped"),
    ],
)
async def test_i41_bedrock_input_deleted_once_the_job_ended_however_it_ended(
    bedrock: Any, emulator: Any, aws: Any, prefix: str, fault: Any, status: str
) -> None:
    """The input object stays while the job runs and is gone once it has ended, whether
    it failed, expired, was stopped or partially completed (a running job still reads
    it; an ended one never will)."""
    emulator.hold_clock()
    if fault is not None:
        emulator.add_fault({"provider": "bedrock", "op": "batch.create", "fault": fault})
    provider = bedrock()
    key = f"k-gone-{status}"
    handle = await provider.submit_batch(requests(100), key)
    emulator.advance(20)
    assert (await provider.poll_batch(handle)).state == "running"
    assert _exists(aws, _input_key(prefix, key))  # a running job still reads it
    if fault is None:
        await provider.cancel_batch(handle)
        assert (await provider.poll_batch(handle)).raw_status == "Stopping"
        assert _exists(aws, _input_key(prefix, key))  # stopping is not ended yet
    emulator.advance(3600)
    got = await provider.poll_batch(handle)
    assert got.raw_status == status
    assert not _exists(aws, _input_key(prefix, key))
    if status == "PartiallyCompleted":
        assert len([r async for r in provider.batch_results(handle)]) == 40
    else:
        with pytest.raises(BatchNotEnded):
            [r async for r in provider.batch_results(handle)]
    # A second poll of the ended job (its input already gone) is the same status.
    assert (await provider.poll_batch(handle)).raw_status == status


def _profile_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, region: str) -> None:
    """``~/.aws/credentials`` and ``~/.aws/config`` with a named profile, chosen by
    ``AWS_PROFILE``; no key or region in the environment."""
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[agac-analyst]\naws_access_key_id = AKIAPROFILEKEY\n"
        "aws_secret_access_key = profile-secret\n"
    )
    config = tmp_path / "config"
    config.write_text(f"[profile agac-analyst]\nregion = {region}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "agac-analyst")


def _signature_scope(emulator: Any) -> str:
    """The ``Credential=<key>/<date>/<region>/<service>`` of the last Converse call."""
    [chat] = [r for r in emulator.requests() if r["op"] == "chat"]
    header = str(chat["headers"]["authorization"])
    scope = header.split("Credential=", 1)[1].split(",", 1)[0]
    key, _date, region, service, _ = scope.split("/")
    return f"{key}/{region}/{service}"


async def test_i41_bedrock_credentials_and_region_from_a_named_profile(
    aws: Any, emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The standard chain: a named profile's key and region (``AWS_PROFILE`` over
    ``~/.aws``) sign the Converse call, with nothing of AWS's in the environment."""
    _profile_files(tmp_path, monkeypatch, "eu-west-3")
    provider = BedrockProvider(ProviderSettings(name="bedrock"))
    try:
        answer = await provider.complete(Request("bedrock", MODEL, (Message("user", "hi"),)))
    finally:
        await provider.aclose()
    assert answer.text
    assert _signature_scope(emulator) == "AKIAPROFILEKEY/eu-west-3/bedrock"


async def test_i41_bedrock_region_option_wins_over_the_profile_and_environment(
    aws: Any, emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``providers: bedrock: region:`` is the region calls are signed for, over the
    profile's and over ``AWS_REGION``; without it ``AWS_REGION`` wins over the profile."""
    _profile_files(tmp_path, monkeypatch, "eu-west-3")
    monkeypatch.setenv("AWS_REGION", "ap-southeast-2")
    chat = Request("bedrock", MODEL, (Message("user", "hi"),))
    for options, region in (({"region": "us-west-2"}, "us-west-2"), ({}, "ap-southeast-2")):
        emulator.reset()
        provider = BedrockProvider(ProviderSettings(name="bedrock", options=options))
        try:
            await provider.complete(chat)
        finally:
            await provider.aclose()
        assert _signature_scope(emulator) == f"AKIAPROFILEKEY/{region}/bedrock"


def test_i41_bedrock_input_file_size_limit_splits_by_bytes_none_below_minimum(
    aws: Any, prefix: str
) -> None:
    """A job's input file is at most 1 GB (Bedrock's quota): with the limits the adapter
    gives the engine, 300 records of 4 MB each (1.2 GB, under the 50,000-record limit)
    are cut by bytes, and the short last part is lifted to Bedrock's minimum of 100 by
    the part before it, both parts still within 1 GB."""
    provider = BedrockProvider(
        ProviderSettings(
            name="bedrock", options={"batch_bucket": prefix, "role_arn": ROLE}, batch=True
        )
    )
    api = batch_api(provider)
    assert api is not None and api.max_bytes == MAX_FILE_BYTES == 1024**3
    record = 4 * 1024 * 1024
    sizes = [(f"r{i}", record) for i in range(300)]
    split = split_parts(
        sizes, most=api.max_requests, max_bytes=api.max_bytes, least=api.min_requests
    )
    assert [len(p) for p in split.parts] == [200, 100] and split.short == []
    assert all(len(p) * (record + LINE_OVERHEAD) <= MAX_FILE_BYTES for p in split.parts)
    greedy = MAX_FILE_BYTES // (record + LINE_OVERHEAD)
    assert greedy == 255  # cut greedily, the last part would hold 45: below the minimum
