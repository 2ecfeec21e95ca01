"""Issue 35 (Hardening, third pass), items 1 and 2, at the helpers: the one rule every
path from data follows (resolved, symbolic links included, inside the project or a listed
folder) and the reading of an attachment (a regular file, its size judged by ``stat``
before a byte is read, hashed a chunk at a time)."""

from __future__ import annotations

import hashlib
import io
import os
import threading
import tracemalloc
from pathlib import Path

import pytest

from agac.confinement import Confinement, NotRegularFile, PathLoop, PathOutside, open_regular
from agac.errors import AttachmentError
from agac.media import (
    MAX_FILE_BYTES,
    AttachmentLimits,
    Destination,
    PdfPages,
    VerifiedReader,
    describe_file,
    pdf_pages,
    read_verified,
    write_base64,
)
from agac.prompt.attachments import resolve
from agac.prompt.prefix import ContextFileError, project_reader
from agac.samplefiles import pdf_bytes, png_bytes


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A project with ``files/in.png``, and a folder beside it holding ``scans/out.png``."""
    root = tmp_path / "proj"
    (root / "files").mkdir(parents=True)
    (root / "files" / "in.png").write_bytes(png_bytes())
    outside = tmp_path / "outside"
    (outside / "scans").mkdir(parents=True)
    (outside / "scans" / "out.png").write_bytes(png_bytes(seed=1))
    (outside / "scans-2").mkdir()
    (outside / "scans-2" / "near.png").write_bytes(png_bytes(seed=2))
    return root, outside


def test_i35_1_a_path_is_judged_where_it_resolves(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    reach = Confinement.of(root)
    assert reach.locate("files/in.png") == root.resolve() / "files" / "in.png"
    assert reach.locate(str(root / "files" / "in.png")) == root.resolve() / "files" / "in.png"
    (root / "files" / "link.png").symlink_to(outside / "scans" / "out.png")
    (root / "files" / "inner.png").symlink_to(root / "files" / "in.png")
    (root / "door").symlink_to(outside)
    assert reach.locate("files/inner.png") == root.resolve() / "files" / "in.png"
    for ref in (
        str(outside / "scans" / "out.png"),  # absolute
        "../outside/scans/out.png",  # ../
        "files/link.png",  # a link to a file out of the project
        "door/scans/out.png",  # a link to a folder out of it
        "files/../../outside/scans/out.png",
        "/etc/passwd",
    ):
        with pytest.raises(PathOutside) as out:
            reach.locate(ref)
        assert not out.value.resolved.is_relative_to(root.resolve()), ref


def test_i35_1_only_the_listed_folders_are_let_in(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (root / "files" / "link.png").symlink_to(outside / "scans" / "out.png")
    (outside / "alias").symlink_to(outside / "scans")
    reach = Confinement.of(root, [str(outside / "alias")])  # a listed folder is resolved
    assert reach.folders == ((outside / "scans").resolve(),)
    assert reach.locate("files/link.png") == (outside / "scans" / "out.png").resolve()
    assert reach.locate(str(outside / "scans" / "out.png")).name == "out.png"
    with pytest.raises(PathOutside):  # a sibling whose name starts the same is not inside
        reach.locate(str(outside / "scans-2" / "near.png"))
    with pytest.raises(PathOutside):
        reach.locate(str(outside / "alias" / ".." / "scans-2" / "near.png"))
    relative = Confinement.of(root, ["../outside/scans"])  # relative to the project root
    assert relative.folders == ((outside / "scans").resolve(),)


def test_i35_1_a_symbolic_link_loop_names_no_file(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(PathLoop):
        Confinement.of(tmp_path).locate("a")


def test_i35_1_attachments_and_read_share_the_rule(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (root / "files" / "link.png").symlink_to(outside / "scans" / "out.png")
    (root / "notes.md").symlink_to(outside / "scans" / "out.png")
    for ref in ("files/link.png", str(outside / "scans" / "out.png"), "../outside/scans/out.png"):
        with pytest.raises(AttachmentError) as refused:
            resolve(ref, Confinement.of(root))
        assert refused.value.reason == "attachment_outside_project", ref
        assert "attachment_folders" in (refused.value.hint or "")
    listed = Confinement.of(root, [str(outside / "scans")])
    att = resolve("files/link.png", listed)
    assert att.name == "link.png" and att.sha256 == hashlib.sha256(png_bytes(seed=1)).hexdigest()
    with pytest.raises(ContextFileError) as read_out:
        project_reader(root, 1000)("notes.md")
    assert read_out.value.code == "context_file_refused"


def test_i35_2_only_a_regular_file_is_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "folder").mkdir()
    for name, kind in (("pipe", "named pipe"), ("zero", "character device"), ("folder", "folder")):
        with pytest.raises(NotRegularFile) as refused:
            open_regular(tmp_path / name)  # a FIFO with no writer: returns at once
        assert refused.value.kind == kind
    (tmp_path / "plain").write_bytes(b"abc")
    fh, st = open_regular(tmp_path / "plain")
    with fh:
        assert (fh.read(), st.st_size) == (b"abc", 3)


def _on_time(fn: object) -> BaseException | None:
    """Run ``fn`` in a thread and return what it raised; a hang fails the test (the
    60 s wait is only a guard: the call returns at once unless it blocks)."""
    got: list[BaseException | None] = []

    def go() -> None:
        try:
            fn()  # type: ignore[operator]
            got.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            got.append(exc)

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(60)
    assert got, "the call hung"
    return got[0]


def test_i35_2_a_fifo_or_a_device_fails_with_its_own_reason(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.png")
    (tmp_path / "zero.png").symlink_to("/dev/zero")
    for name in ("pipe.png", "zero.png"):
        found = _on_time(lambda n=name: describe_file(str(tmp_path / n)))
        assert isinstance(found, AttachmentError), found
        assert found.reason == "attachment_not_regular_file"
        assert "nothing was read" in found.message
    dev = Confinement.of(tmp_path, ["/dev"])
    found = _on_time(lambda: resolve("zero.png", dev))
    assert isinstance(found, AttachmentError) and found.reason == "attachment_not_regular_file"


def _sparse(path: Path, head: bytes, size: int) -> Path:
    """A file of ``size`` bytes that starts with ``head``, the rest a hole (no disk used)."""
    path.write_bytes(head)
    os.truncate(path, size)
    return path


def test_i35_2_a_file_over_the_limit_is_refused_by_stat_unread(tmp_path: Path) -> None:
    big = _sparse(tmp_path / "big.png", png_bytes(), MAX_FILE_BYTES + 1)
    tracemalloc.start()
    try:
        with pytest.raises(AttachmentError) as refused:
            describe_file(str(big))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.reason == "attachment_too_large"
    assert "it was not read" in refused.value.message
    assert peak < 1024 * 1024
    openai = AttachmentLimits(max_file_bytes={"image": 20 * 1024 * 1024})
    mid = _sparse(tmp_path / "mid.png", png_bytes(), 21 * 1024 * 1024)
    with pytest.raises(AttachmentError) as over:
        describe_file(str(mid), destination=Destination("openai", openai))
    assert over.value.reason == "attachment_too_large"
    assert "openai" in over.value.message and "20 MB" in over.value.message
    groq = AttachmentLimits(kinds=frozenset({"image"}), max_request_bytes=4 * 1024 * 1024)
    assert groq.file_limit("image") == 3 * 1024 * 1024  # what fits in a request as base64


def test_i35_2_a_file_is_hashed_a_chunk_at_a_time(tmp_path: Path) -> None:
    pdf = pdf_bytes(3)
    head, tail = pdf.split(b"%%EOF")[0], b"%%EOF\n"
    size = 64 * 1024 * 1024
    path = _sparse(tmp_path / "big.pdf", head, size - len(tail))
    with path.open("ab") as fh:
        fh.write(tail)
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    tracemalloc.start()
    try:
        att = describe_file(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (att.size, att.sha256, att.pages) == (size, digest.hexdigest(), 3)
    assert peak < 8 * 1024 * 1024, f"{peak:,} bytes held to describe a {size:,}-byte file"


@pytest.mark.parametrize("step", [1, 7, 1000, 1 << 16, 1 << 20])
def test_i35_2_pages_are_counted_the_same_a_chunk_at_a_time(step: int) -> None:
    for data in (pdf_bytes(5), b"%PDF-1.7\n<< /Type /Pages /Kids [] /Count 12 >>\n%%EOF\n"):
        pages = PdfPages()
        for at in range(0, len(data), step):
            pages.feed(data[at : at + step])
        assert pages.result() == pdf_pages(data) and pages.result() in (5, 12)


def test_i35_2_no_read_at_send_time_follows_a_file_that_became_a_pipe(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(png_bytes())
    att = describe_file(str(path))
    path.unlink()
    os.mkfifo(path)
    for read in (
        lambda: read_verified(att),
        lambda: write_base64(att, io.BytesIO()),
        lambda: VerifiedReader(att),
    ):
        found = _on_time(read)
        assert isinstance(found, AttachmentError) and found.reason == "attachment_not_regular_file"


def test_i35_2_no_read_at_send_time_takes_a_file_that_grew(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(png_bytes())
    att = describe_file(str(path))
    os.truncate(path, MAX_FILE_BYTES + 1)  # sparse: judged by fstat, never read
    tracemalloc.start()
    try:
        for read in (
            lambda: read_verified(att),
            lambda: write_base64(att, io.BytesIO()),
            lambda: VerifiedReader(att),
        ):
            with pytest.raises(AttachmentError) as changed:
                read()
            assert changed.value.reason == "attachment_changed"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024
    os.truncate(path, att.size)  # back as it was: read and checked as before
    assert read_verified(att) == png_bytes()
