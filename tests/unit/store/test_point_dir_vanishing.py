"""A folder storage point whose folder vanishes under a write (another process moved it
away, a share unmounted) reports a failed write — a StoreError the run stops on — never a
bare FileNotFoundError that would end the point's writer thread without a word."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agac.errors import StoreError
from agac.store.points.objects import DirectoryObjects


def _gone(*_args: object, **_kwargs: object) -> None:
    raise FileNotFoundError(2, "No such file or directory")


@pytest.mark.parametrize("write", ["create", "put"])
def test_o5_a_write_whose_folder_vanishes_is_a_failed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    objects = DirectoryObjects(tmp_path / "point")
    monkeypatch.setattr(os, "link" if write == "create" else "replace", _gone)
    with pytest.raises(StoreError, match="its folder is gone"):
        if write == "create":
            objects.create("log/seg-1", b"data")
        else:
            objects.put("log/seg-1", b"data")


def test_o5_a_missing_object_still_reads_as_none(tmp_path: Path) -> None:
    assert DirectoryObjects(tmp_path / "point").get("log/none") is None
