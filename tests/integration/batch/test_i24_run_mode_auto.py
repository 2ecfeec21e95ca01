"""``run_mode: auto`` (decision 0085): online below ``auto_batch_min_records`` input
records, batch from it on — unless the provider has no batch API or the run's deadline
leaves less than ``batch_deadline`` — chosen once at admission and kept by the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from batch_support import creates, store

from agac import api
from agac.cli.render import print_summary
from agac.config import find_project, store_url
from agac.emulator.testing import RunningEmulator
from agac.store.repository import Store
from agac.testing import ManualClock, write_project

WF = "auto"


def _project(
    root: Path,
    records: int,
    *,
    model: str = "openai/gpt-4o-mini",
    extra: str = "",
    action: str = "",
) -> None:
    workflow = (
        f"name: {WF}\ninput: {{path: data/in.jsonl, id_field: id}}\n{extra}"
        f"defaults: {{model: {model}, run_mode: auto, max_tokens: 64}}\n"
        'actions:\n  - name: classify\n    prompt: "Classify: {{ source.text }}"\n'
        f"{action}"
    )
    rows = ({"id": f"r{i}", "text": f"item {i}"} for i in range(records))
    write_project(root, workflow, data={"data/in.jsonl": rows})


def _chosen(root: Path, run_id: str) -> list[dict[str, Any]]:
    return [
        e["data"] | {"action": e["action"]}
        for e in api.events(run_id, root)
        if e["kind"] == "run_mode_chosen"
    ]


def _mode_of_run(root: Path, run_id: str) -> str:
    with store(root) as s:
        run = s.get_run(run_id)
        assert run is not None
        return str(run.config["actions"][0]["run_mode"])


def test_i24_run_mode_auto_499_records_run_online(emulator: RunningEmulator, project: Path) -> None:
    _project(project, 499)
    result = api.run(WF, project, progress=False)
    assert result.exit_code == 0, result.summary["actions"]["classify"]["reasons"]
    run_id = result.summary["run_id"]
    assert creates(emulator.stats(), "openai") == 0
    assert result.summary["actions"]["classify"]["answered"] == 499
    assert _mode_of_run(project, run_id) == "online"
    (choice,) = _chosen(project, run_id)
    assert choice["mode"] == "online" and choice["why"] == "below_threshold"
    assert choice["units"] == 499
    assert result.summary["auto_modes"]["classify"]["mode"] == "online"


def test_i24_run_mode_auto_500_records_run_in_batch(
    emulator: RunningEmulator, project: Path, capsys: Any
) -> None:
    _project(project, 500)
    first = api.run(WF, project, progress=False)
    assert first.exit_code == 75  # waiting on the batch
    assert creates(emulator.stats(), "openai") == 1
    run_id = first.summary["run_id"]
    assert _mode_of_run(project, run_id) == "batch"
    (choice,) = _chosen(project, run_id)
    assert choice["mode"] == "batch" and choice["why"] == "at_threshold"
    status = api.status(WF, project)
    assert status["auto_modes"]["classify"]["mode"] == "batch"
    assert "500 units" in status["auto_modes"]["classify"]["why"]
    print_summary(status)
    assert "classify: run_mode auto chose batch (at_threshold: 500 units" in capsys.readouterr().out
    emulator.advance(120)
    done = api.run(WF, project, progress=False)
    assert done.exit_code == 0 and done.summary["actions"]["classify"]["answered"] == 500
    assert {r["tier"] for r in api.cost(run_id, project)["rows"]} == {"batch"}


def test_i24_run_mode_auto_a_lower_threshold_is_kept(
    emulator: RunningEmulator, project: Path
) -> None:
    _project(project, 3, action="    auto_batch_min_records: 3\n")
    first = api.run(WF, project, progress=False)
    assert first.exit_code == 75 and creates(emulator.stats(), "openai") == 1


def test_i24_run_mode_auto_tight_deadline_runs_online(
    emulator: RunningEmulator, project: Path
) -> None:
    _project(project, 500, extra="deadline: 2h\n")
    result = api.run(WF, project, progress=False)
    assert result.exit_code == 0, result.summary["actions"]["classify"]["reasons"]
    assert creates(emulator.stats(), "openai") == 0
    (choice,) = _chosen(project, result.summary["run_id"])
    assert choice["mode"] == "online" and choice["why"] == "deadline"
    assert "batch_deadline 25.0 h" in choice["detail"]


def test_i24_run_mode_auto_provider_without_batch_api_runs_online(project: Path) -> None:
    _project(project, 500, model="mock/any")
    result = api.run(WF, project, progress=False)
    assert result.exit_code == 0, result.summary["actions"]["classify"]["reasons"]
    (choice,) = _chosen(project, result.summary["run_id"])
    assert choice["mode"] == "online" and choice["why"] == "no_batch_api"
    assert _mode_of_run(project, result.summary["run_id"]) == "online"


def test_i24_run_mode_auto_choice_is_kept_across_a_continuation(
    emulator: RunningEmulator, project: Path
) -> None:
    """Admitted 26 h before its deadline the action goes to batch; two hours later the
    same choice made anew would be online, but the continuation keeps batch."""
    _project(project, 500, extra="deadline: 26h\n")
    clock = ManualClock()
    st = Store(store_url(find_project(project)), clock=clock)
    try:
        first = api.run(WF, project, progress=False, store=st)
        assert first.exit_code == 75
        run_id = first.summary["run_id"]
        clock.advance(2 * 3600)
        emulator.advance(120)
        done = api.run(WF, project, progress=False, store=st)
    finally:
        st.close()
    assert done.exit_code == 0, done.notes
    assert done.summary["run_id"] == run_id
    assert done.summary["actions"]["classify"]["answered"] == 500
    assert creates(emulator.stats(), "openai") == 1
    assert len(_chosen(project, run_id)) == 1
    assert _mode_of_run(project, run_id) == "batch"
    assert {r["tier"] for r in api.cost(run_id, project)["rows"]} == {"batch"}
