"""X1 (issue 29, item 8): ``agac export --out`` never replaces the store, a workflow's input
or workflow file, or anything that is not a regular file. It refuses the store's files
and the workflow's files (``protected_file``, exit 2, also through a symlink or a hard
link), writes through a symlink to its target (the link stays), and writes into a FIFO or
a device by opening it (it stays what it was); a regular file is still replaced whole.

Device nodes are made in the test's own folder (``mknod``, as root) rather than touching
``/dev``; without the privilege those tests skip.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from pathlib import Path

import pytest
from cli_support import Quickstart, Result, agac

EXPORT = ("export", "review_triage", "--action", "classify")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _store_still_reads(root: Path) -> None:
    status = agac("status", "review_triage", "--json", cwd=root)
    assert status.code == 0, status
    assert status.json()["state"] == "succeeded"


def _refused(done: Result, path: str) -> dict[str, object]:
    assert done.code == 2, done
    doc = done.json()
    assert doc["error"]["code"] == "protected_file", doc
    assert path in doc["error"]["message"]
    return dict(doc["error"])


@pytest.mark.parametrize("name", [".agac/agac.db", ".agac/agac.db-wal", ".agac/agac.db-shm"])
def test_i29_8_x1_export_refuses_the_store(quickstart: Quickstart, name: str) -> None:
    root = quickstart.root
    db = root / ".agac" / "agac.db"
    before = db.stat().st_size
    for fmt in ("jsonl", "csv"):
        done = agac(*EXPORT, "--format", fmt, "--out", name, "--json", cwd=root)
        assert "a file of the agac store" in str(_refused(done, name)["message"])
    wide = agac(
        "export",
        "review_triage",
        "--format",
        "parquet",
        "--all-actions",
        "--out",
        name,
        "--json",
        cwd=root,
    )
    _refused(wide, name)
    assert db.stat().st_size >= before
    _store_still_reads(root)


def test_x1_export_refuses_the_store_through_a_symlink_or_a_hard_link(
    quickstart: Quickstart,
) -> None:
    root = quickstart.root
    (root / "via-link.jsonl").symlink_to(root / ".agac" / "agac.db")
    os.link(root / ".agac" / "agac.db", root / "hard.jsonl")
    try:
        message = str(
            _refused(
                agac(*EXPORT, "--out", "via-link.jsonl", "--json", cwd=root), "via-link.jsonl"
            )["message"]
        )
        assert "through a link" in message
        _refused(agac(*EXPORT, "--out", "hard.jsonl", "--json", cwd=root), "hard.jsonl")
        assert (root / "via-link.jsonl").is_symlink()
    finally:
        (root / "via-link.jsonl").unlink()
        (root / "hard.jsonl").unlink()
    _store_still_reads(root)


def test_x1_export_refuses_an_input_and_the_workflow_file(quickstart: Quickstart) -> None:
    root = quickstart.root
    for name, what in [
        ("data/reviews/2026-10.jsonl", "an input file of workflow review_triage"),
        ("workflows/review_triage.yml", "the workflow file of review_triage"),
    ]:
        before = _digest(root / name)
        done = agac(*EXPORT, "--out", name, "--json", cwd=root)
        assert what in str(_refused(done, name)["message"])
        wide = agac("export", "review_triage", "--all-actions", "--out", name, cwd=root)
        assert wide.code == 2 and "protected_file" not in wide.err and what in wide.err, wide
        assert _digest(root / name) == before


def test_x1_export_writes_through_a_symlink_to_its_target(
    quickstart: Quickstart, tmp_path: Path
) -> None:
    root = quickstart.root
    target = tmp_path / "elsewhere" / "rows.jsonl"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    done = agac(*EXPORT, "--out", str(link), cwd=root)
    assert done.code == 0, done
    assert link.is_symlink() and link.resolve() == target
    rows = [json.loads(x) for x in target.read_text().splitlines()]
    assert len(rows) == 24 and rows[0]["status"] == "answered"
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "new" / "made.jsonl")
    done = agac("export", "review_triage", "--all-actions", "--out", str(dangling), cwd=root)
    assert done.code == 0, done
    assert dangling.is_symlink()
    assert len((tmp_path / "new" / "made.jsonl").read_text().splitlines()) == 24


def test_x1_export_writes_into_a_fifo(quickstart: Quickstart, tmp_path: Path) -> None:
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = agac(*EXPORT, "--out", str(fifo), cwd=quickstart.root)
    reader.join(timeout=240)
    assert done.code == 0, done
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert len(received[0].decode().splitlines()) == 24
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = agac(
        "export",
        "review_triage",
        "--all-actions",
        "--format",
        "parquet",
        "--out",
        str(fifo),
        cwd=quickstart.root,
    )
    reader.join(timeout=240)
    assert done.code == 0, done
    assert stat.S_ISFIFO(fifo.stat().st_mode) and received[1][:4] == b"PAR1"


def _device(tmp_path: Path, name: str, minor: int) -> Path:
    """A character device like /dev/null (1, 3) or /dev/full (1, 7), in the test's folder."""
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return node


def test_x1_export_writes_into_a_device_and_never_replaces_it(
    quickstart: Quickstart, tmp_path: Path
) -> None:
    null = _device(tmp_path, "null", 3)
    done = agac(*EXPORT, "--out", str(null), "--json", cwd=quickstart.root)
    assert done.code == 0, done
    assert done.json()["rows"] == 24
    assert stat.S_ISCHR(null.stat().st_mode)
    full = _device(tmp_path, "full", 7)
    done = agac(*EXPORT, "--out", str(full), "--json", cwd=quickstart.root)
    assert done.code == 1 and json.loads(done.out)["error"]["code"] == "disk_full", done
    assert stat.S_ISCHR(full.stat().st_mode)  # still the device, not a regular file


def test_x1_a_regular_file_is_still_replaced_whole(quickstart: Quickstart, tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    out.write_text("an older export\n")
    inode = out.stat().st_ino
    done = agac(*EXPORT, "--out", str(out), cwd=quickstart.root)
    assert done.code == 0, done
    assert len(out.read_text().splitlines()) == 24
    assert out.stat().st_ino != inode  # a new file moved into place, never written half-way
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]  # no temporary file left


# --- issue 35, item 15: messages ------------------------------------------------------------


def test_i35_15_export_format_follows_the_name_given_to_out(
    quickstart: Quickstart, tmp_path: Path
) -> None:
    wide = tmp_path / "r.parquet"
    done = agac(
        "export",
        "review_triage",
        "--all-actions",
        "--out",
        str(wide),
        "--json",
        cwd=quickstart.root,
    )
    assert done.code == 0, done
    assert done.json()["format"] == "parquet" and wide.read_bytes()[:4] == b"PAR1"
    rows = tmp_path / "r.CSV"
    done = agac(*EXPORT, "--out", str(rows), "--json", cwd=quickstart.root)
    assert done.code == 0 and done.json()["format"] == "csv", done
    assert rows.read_text().splitlines()[0] == "key,status,reason,detail,output,tenant"


def test_i35_15_export_refuses_a_format_its_out_name_contradicts(
    quickstart: Quickstart, tmp_path: Path
) -> None:
    out = tmp_path / "r.parquet"
    done = agac(*EXPORT, "--format", "jsonl", "--out", str(out), "--json", cwd=quickstart.root)
    assert done.code == 2, done
    error = done.json()["error"]
    assert "--format jsonl contradicts --out" in error["message"] and "parquet" in error["message"]
    assert not out.exists()


def test_i35_15_export_to_dev_stdout_into_a_pipe_writes_the_pipe(quickstart: Quickstart) -> None:
    done = agac(*EXPORT, "--out", "/dev/stdout", cwd=quickstart.root)  # stdout is a pipe here
    assert done.code == 0, done
    lines = done.out.splitlines()
    assert len(lines) == 24 and all(json.loads(line)["key"] for line in lines)
    assert "wrote 24 rows to /dev/stdout" in done.err
