"""When most units of an action fail with one reason, the summary says the first message
and the fix, and ``next`` is a command that works (issue 12 item 7): no ``agac retry``
for failures a retry cannot fix, and a refused batch names its file."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

RENDER = """\
name: wf
input: {path: data/a.jsonl, id_field: id}
defaults: {model: mock/m}
actions:
  - name: ask
    prompt: "Say {{ source.title }}"
"""
ROWS = [{"id": i, "text": f"t{i}"} for i in range(5)] + [{"id": 9, "text": "x", "title": "T"}]


def test_render_error_majority_says_first_message_and_fix_not_retry(tmp_path: Path) -> None:
    write_project(tmp_path, RENDER, data={"data/a.jsonl": ROWS})

    doc = agac("run", "wf", "--json", cwd=tmp_path).json()

    assert doc["actions"]["ask"]["reasons"] == {"render_error": 5}
    [advice] = doc["advice"]
    assert (advice["action"], advice["reason"], advice["units"]) == ("ask", "render_error", 5)
    assert advice["first"]["key"] == "0" and "title" in advice["first"]["detail"]
    assert "agac render wf --record 0 --action ask" in advice["fix"]
    assert doc["next"] == "agac run wf"  # not `agac retry`: the same template fails again
    text = agac("status", "wf", cwd=tmp_path)
    assert "ask: 5 failed render_error; the first, 0:" in text.out
    assert "fix: guard the field" in text.out
    assert text.out.splitlines()[-1].endswith("5 failed: agac run wf")

    # what the advice says works: fix the template, then agac run
    wf = tmp_path / "workflows" / "wf.yml"
    wf.write_text(wf.read_text().replace("source.title", "source.title | default('none')"))
    fixed = agac("run", "wf", "--json", cwd=tmp_path)
    assert fixed.code == 0, fixed
    assert fixed.json()["actions"]["ask"]["answered"] == 6


BATCHED = """\
name: wf
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, run_mode: batch}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
"""


def test_refused_batch_names_the_file_and_the_command_that_works(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    write_project(
        tmp_path,
        BATCHED,
        data={
            "data/a.jsonl": [{"id": i, "text": f"a{i}"} for i in range(3)],
            "data/b.jsonl": [{"id": 10 + i, "text": f"b{i}"} for i in range(3)],
        },
    )
    env = emulator.env()
    emulator.add_fault(
        {
            "provider": "openai",
            "op": "batch.create",
            "nth": 2,
            "times": 1,
            "fault": {"http": 400, "message": "model not allowed for batch"},
        }
    )

    refused = agac("run", "wf", "--json", cwd=tmp_path, env=env)

    assert refused.code == 1, refused
    doc = refused.json()
    assert doc["state"] == "failed"
    assert doc["next"] == "agac run wf"  # `agac retry` is refused while a batch is out
    error = doc["error"]["message"]  # {code, message, hint}, as every error
    assert "refused the batch of ask for" in error and "model not allowed for batch" in error
    refused_file = "b.jsonl" if "for b.jsonl" in error else "a.jsonl"
    assert f"for {refused_file}:" in error and "`agac run wf`" in error
    [advice] = doc["advice"]
    assert advice["reason"] == "batch_refused" and refused_file in advice["first"]["detail"]

    again = agac("run", "wf", "--json", cwd=tmp_path, env=env)  # what `next` said
    assert again.code == 75, again
    emulator.advance(120)
    done = agac("run", "wf", "--json", cwd=tmp_path, env=env)
    assert done.code == 0, done
    assert done.json()["actions"]["ask"]["answered"] == 6
    assert emulator.stats()["requests"]["openai"]["batch.create"] == 3  # only the refused again


CHAINED = (
    BATCHED
    + """\
  - name: more
    dependencies: [ask]
    prompt: "More {{ ask.text }}"
"""
)


def test_a_waiting_run_names_each_batch_and_file_it_waits_on(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    write_project(
        tmp_path,
        CHAINED,
        data={
            "data/a.jsonl": [{"id": i, "text": f"a{i}"} for i in range(3)],
            "data/b.jsonl": [{"id": 10 + i, "text": f"b{i}"} for i in range(3)],
        },
    )
    env = emulator.env()

    waiting = agac("run", "wf", "--json", cwd=tmp_path, env=env)

    assert waiting.code == 75, waiting
    rows = waiting.json()["waiting_on"]
    ids = {r["file"]: r["batch_id"] for r in rows if r["action"] == "ask"}
    assert sorted(ids) == ["a.jsonl", "b.jsonl"] and all(ids.values())
    assert {r["file"]: r["waits_on"] for r in rows if r["action"] == "more"} == {
        f: [i] for f, i in ids.items()
    }
    assert (
        "more: waiting until every input file can be sent (B4): a.jsonl waits on "
        f"ask's batch {ids['a.jsonl']}" in waiting.err
    )
    text = agac("status", "wf", cwd=tmp_path, env=env)
    assert "waiting on:" in text.out
    for f, i in ids.items():
        assert any(f in line and i in line and "ask" in line for line in text.out.splitlines())
        assert any(f in line and f"waits on {i}" in line for line in text.out.splitlines())


def test_a_run_held_back_by_a_refused_file_names_the_batches_still_out(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    write_project(
        tmp_path,
        BATCHED,
        data={
            "data/a.jsonl": [{"id": i, "text": f"a{i}"} for i in range(3)],
            "data/b.jsonl": [{"id": 10 + i, "text": f"b{i}"} for i in range(3)],
        },
    )
    env = emulator.env()
    emulator.add_fault(
        {
            "provider": "openai",
            "op": "batch.create",
            "nth": 2,
            "times": 1,
            "fault": {"http": 400, "message": "model not allowed for batch"},
        }
    )

    refused = agac("run", "wf", "--json", cwd=tmp_path, env=env)

    assert refused.code == 1, refused
    [out] = refused.json()["waiting_on"]
    assert out["action"] == "ask" and out["batch_id"] and out["file"] in ("a.jsonl", "b.jsonl")
    text = agac("status", "wf", cwd=tmp_path, env=env)
    assert "batches still out (the next run adopts them):" in text.out
    assert any(out["file"] in line and out["batch_id"] in line for line in text.out.splitlines())
