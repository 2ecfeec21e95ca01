"""Where a path that comes from data may lead, and what may be read there.

A path written in a record, or rendered by a template from one, is data: whoever writes
the data chooses it. agac reads such a path only inside the project, or inside a folder
the workflow itself lists (an attachment's ``attachment_folders``). The rule is judged on
the path as the file system resolves it — every symbolic link followed, ``..`` applied
(:meth:`Confinement.locate`) — so neither a ``../``, an absolute path nor a link that
points out of the project reaches a file elsewhere. The listed folders are resolved the
same way, once.

What is read there must be a regular file (:func:`open_regular`): a named pipe would
block the reader, a device such as ``/dev/zero`` never ends. The file is opened without
blocking and judged by ``fstat`` on the open descriptor, so nothing is read before it is
known to be a regular file of a known size.

The module is a leaf: the attachments of a prompt and ``read()`` in a
``context_prefix`` both judge their paths here.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Confinement",
    "NotRegularFile",
    "PathLoop",
    "PathOutside",
    "folder_path",
    "open_regular",
]


class PathOutside(ValueError):
    """A path from data that resolves outside every place it may be read from."""

    def __init__(self, ref: str, resolved: Path) -> None:
        super().__init__(f"{ref} resolves to {resolved}")
        self.ref = ref
        self.resolved = resolved


class PathLoop(ValueError):
    """A path whose symbolic links go round in a loop: it names no file."""


class NotRegularFile(ValueError):
    """What a path names is not a regular file: ``kind`` says what it is (``folder``,
    ``named pipe``, ``character device``, ``block device``, ``socket``)."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path} is a {kind}, not a regular file")
        self.kind = kind


def folder_path(root: Path, folder: str) -> Path:
    """A listed folder as the file system resolves it: ``~`` is the home folder, a
    relative path starts at ``root``."""
    return (root / os.path.expanduser(folder)).resolve()


@dataclass(frozen=True)
class Confinement:
    """The places paths from data may lead: the project ``root`` and the ``folders`` a
    workflow lists, all resolved (build it with :meth:`of`)."""

    root: Path
    folders: tuple[Path, ...] = ()

    @classmethod
    def of(cls, root: Path, folders: Iterable[str] = ()) -> Confinement:
        base = root.resolve()
        return cls(base, tuple(folder_path(base, f) for f in folders))

    def locate(self, ref: str) -> Path:
        """The file ``ref`` names — relative to the root, or absolute — resolved with
        every symbolic link followed. PathOutside when it lies outside the root and every
        listed folder; PathLoop when its links loop."""
        try:
            resolved = (self.root / ref).resolve()
        except (RuntimeError, OSError) as exc:  # 3.11 raises RuntimeError for a loop
            raise PathLoop(f"{ref} is a symbolic link loop") from exc
        if not self.holds(resolved):
            raise PathOutside(ref, resolved)
        return resolved

    def holds(self, resolved: Path) -> bool:
        """Whether a resolved path is inside the root or a listed folder."""
        return any(resolved.is_relative_to(p) for p in (self.root, *self.folders))


_KINDS = (
    (stat.S_ISDIR, "folder"),
    (stat.S_ISFIFO, "named pipe"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


def open_regular(path: str | Path) -> tuple[io.BufferedReader, os.stat_result]:
    """The regular file at ``path`` opened for reading, and its ``fstat``.

    Opened without blocking (a named pipe with no writer would wait forever), then judged
    on the descriptor: NotRegularFile for anything but a regular file, before a byte is
    read. OSError as ``open`` raises it (ENXIO, a socket, is NotRegularFile too)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise NotRegularFile(str(path), "socket") from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "special file")
            raise NotRegularFile(str(path), kind)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise
