"""Bedrock crash tests: ``agac run`` SIGKILLed while a model invocation job is being
created (before the create, and after Bedrock accepted it but before the store recorded
it) and while a job's output is being read. The rerun finds the job by its name (its
client token makes a repeated create the same job): never a second job, every record
answered once, nothing ledgered twice. Against the emulator's control plane and moto's S3
on loopback, with fake credentials and the metadata service off."""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from crash_support import agac

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

BUCKET = "agac-crash"
AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
WF = """
name: bedcrash
input: {path: data/, id_field: id}
defaults:
  model: bedrock/anthropic.claude-3-5-haiku-20241022-v1:0
  run_mode: batch
  retry: {max_attempts: 2}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
    schema: {type: object, properties: {label: {enum: [a, b, c]}}, required: [label]}
"""


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)
    yield url
    server.stop()


@pytest.fixture
def aws_env(s3: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The AWS environment of this process (the emulator's jobs reach S3 with it) and of
    every ``agac`` it starts."""
    env = {**AWS, "AWS_ENDPOINT_URL_S3": s3}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def _project(root: Path, records: int) -> None:
    prefix = f"s3://{BUCKET}/crash-{uuid.uuid4().hex[:8]}"
    role = "arn:aws:iam::123456789012:role/agac-batch"
    agac_yml = f"providers:\n  bedrock: {{batch_bucket: {prefix}, role_arn: {role}}}\n"
    rows = {"data/a.jsonl": [{"id": f"r{j}", "text": f"t{j}"} for j in range(records)]}
    write_project(root, WF, workflow_file="bedcrash.yml", data=rows, agac_yml=agac_yml)


def _jobs(emu: RunningEmulator) -> list[dict[str, object]]:
    return [b for b in emu.stats()["batches"] if b["provider"] == "bedrock"]


@pytest.mark.parametrize("point", ["before_submit:1", "after_submit:1"])
def test_i41_sigkill_during_job_creation_never_creates_it_twice(
    tmp_path: Path, aws_env: dict[str, str], point: str
) -> None:
    _project(tmp_path, 150)
    with RunningEmulator(batch_seconds=60) as emu:
        emu.hold_clock()
        env = {**emu.env(), **aws_env}
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": point}, "run", "bedcrash")
        assert crashed.returncode == -signal.SIGKILL
        assert len(_jobs(emu)) == (1 if point.startswith("after") else 0)
        first = agac(tmp_path, env, "run", "bedcrash", "--json")
        assert first.returncode == 75, first.stderr
        emu.advance(120)
        done = agac(tmp_path, env, "run", "bedcrash", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["actions"]["classify"]["answered"] == 150
        stats = emu.stats()
        assert len(_jobs(emu)) == 1  # found again by its name, never created twice
        assert stats["requests"]["bedrock"]["batch.create"] == 1
        assert stats["duplicate_answers"] == 0


def test_i41_sigkill_while_reading_job_output_reads_nothing_twice(
    tmp_path: Path, aws_env: dict[str, str]
) -> None:
    _project(tmp_path, 2500)
    with RunningEmulator(batch_seconds=60) as emu:
        emu.hold_clock()
        env = {**emu.env(), **aws_env}
        assert agac(tmp_path, env, "run", "bedcrash").returncode == 75
        emu.advance(120)
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": "mid_ingest:1"}, "run", "bedcrash")
        assert crashed.returncode == -signal.SIGKILL
        done = agac(tmp_path, env, "run", "bedcrash", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["actions"]["classify"]["answered"] == 2500
        cost = json.loads(agac(tmp_path, env, "cost", "bedcrash", "--json").stdout)
        assert sum(r["calls"] for r in cost["rows"]) == 2500  # none ledgered twice
        assert emu.stats()["requests"]["bedrock"]["batch.create"] == 1
        assert emu.stats()["duplicate_answers"] == 0
