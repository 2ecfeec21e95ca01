"""vLLM's offline ``run-batch`` as a batch API (``providers: {vllm: {batch: run-batch}}``):
a whole batch step run on this machine by one command, read back by ``custom_id``.

One directory per batch under the project's ``.agac/run-batch/`` (``run_batch_dir``),
named after the batch key::

    input.jsonl      the batch's OpenAI-shaped lines, written before anything runs
    launched.json    the runner's process id, the request count and the model
    lock             held by the runner for as long as it lives
    output.partial   what the command writes (``-o``)
    output.jsonl     the same file once the command exited 0 (renamed: complete)
    exit.json        the command's exit code
    cancelled        agac cancelled the batch
    log.txt          the command's stdout and stderr

Submitting starts a detached runner (``python -m agac.providers.runbatch DIR -- COMMAND``,
which forks itself into a session of its own) and returns at once: the batch lives on when agac exits (B0), and the next run finds it
again by its key. The command runs at most once per batch: the runner takes the lock and
never runs it when ``output.jsonl`` exists, and submitting a key whose runner was launched
launches nothing. A runner that died without an exit code (the machine went down) is a
failed batch (B7): ``agac retry`` sends its records again.

The output is vLLM's: one line per request, in any order, ``{"id", "custom_id",
"response": {"status_code", "request_id", "body"}, "error"}``; a request with no line is
not returned (B6), a line with an error is that request's error.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agac
from agac.errors import FatalError
from agac.providers._errors import classify
from agac.providers.base import BatchHandle, BatchStatus, Response, Result

__all__ = ["RunBatch", "main"]

INPUT = "input.jsonl"
OUTPUT = "output.jsonl"
PARTIAL = "output.partial"
LAUNCHED = "launched.json"
EXIT = "exit.json"
CANCELLED = "cancelled"
LOCK = "lock"
LOG = "log.txt"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class RunBatch:
    """The batches of one provider run by ``command`` (``vllm run-batch`` by default)
    under ``root``; see the module docstring. ``provider`` names errors and handles."""

    root: Path
    command: tuple[str, ...]
    provider: str

    def folder(self, key: str) -> Path:
        return self.root / _UNSAFE.sub("_", key)

    def submit(self, spooled: Path, key: str, count: int, model: str) -> BatchHandle:
        """Move the spooled lines in and start the runner; a batch already launched under
        ``key`` is returned as it is (its command never runs twice)."""
        folder = self.folder(key)
        found = self.find(key)
        if found is not None:
            spooled.unlink(missing_ok=True)
            return found
        folder.mkdir(parents=True, exist_ok=True)
        os.replace(spooled, folder / INPUT)
        pid = self._launch(folder, model)
        _write_json(folder / LAUNCHED, {"pid": pid, "request_count": count, "model": model})
        return self._handle(key, folder)

    def _launch(self, folder: Path, model: str) -> int:
        """Start the runner, detached (its own session, not our child: it outlives
        agac); its process id."""
        argv = [
            sys.executable,
            "-m",
            "agac.providers.runbatch",
            str(folder),
            "--",
            *self.command,
            "-i",
            str(folder / INPUT),
            "-o",
            str(folder / PARTIAL),
            "--model",
            model,
        ]
        env = dict(os.environ)
        # The runner imports agac from where this process did.
        src = str(Path(agac.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        started = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, env=env, check=False
        )
        if started.returncode != 0:
            raise FatalError(
                f"{self.provider}: could not start the run-batch runner: "
                f"{started.stderr.decode(errors='replace').strip()[-500:]}"
            )
        return int(started.stdout.strip())

    def find(self, key: str) -> BatchHandle | None:
        """The batch launched under ``key``, or None (never launched: send it)."""
        folder = self.folder(key)
        if not (folder / LAUNCHED).exists():
            return None
        return self._handle(key, folder)

    def _handle(self, key: str, folder: Path) -> BatchHandle:
        launched = _read_json(folder / LAUNCHED) or {}
        meta = {"request_count": int(launched.get("request_count") or 0)}
        return BatchHandle(self.provider, folder.name, key, meta)

    def status(self, handle: BatchHandle) -> BatchStatus:
        """``completed`` once the output is complete; ``cancelled``; ``failed`` (the
        command exited non-zero, or its runner is gone without an exit code);
        ``running`` while the runner lives."""
        folder = self.root / handle.id
        count = int(handle.meta.get("request_count") or 0)
        if (folder / OUTPUT).exists():
            return BatchStatus("ended", "completed", count, _lines(folder / OUTPUT))
        if (folder / CANCELLED).exists() and not _locked(folder):
            return BatchStatus("cancelled", "cancelled", count)
        exited = _read_json(folder / EXIT)
        if exited is not None:
            return BatchStatus("failed", f"exit {exited.get('code')}", count)
        if _locked(folder) or _alive(folder):
            return BatchStatus("running", "running", count)
        return BatchStatus("failed", "runner gone", count)

    def failure(self, handle: BatchHandle) -> str:
        """The end of the command's log, for a failed batch's message."""
        try:
            text = (self.root / handle.id / LOG).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text.strip()[-500:]

    def lines(self, handle: BatchHandle) -> Iterator[dict[str, Any]]:
        """The output's lines, as written (any order)."""
        with (self.root / handle.id / OUTPUT).open("rb") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)

    def result(self, line: dict[str, Any], read: Any) -> Result:
        """One output line as a Result; ``read`` turns a 200 body into a Response."""
        custom_id = str(line.get("custom_id"))
        response = line.get("response") or {}
        status = int(response.get("status_code") or 0)
        body = response.get("body")
        error = line.get("error")
        if status == 200 and body and not error:
            answer: Response = read(body, response.get("request_id"))
            return Result(custom_id, "succeeded", response=answer)
        message = error if isinstance(error, str) else json.dumps(error) if error else None
        err = classify(
            self.provider,
            status or None,
            message=message or "vllm run-batch wrote an error line",
            request_id=response.get("request_id"),
        )
        return Result(custom_id, "errored", error=err)

    def cancel(self, handle: BatchHandle) -> None:
        """Mark the batch cancelled and stop its runner and command (their session)."""
        folder = self.root / handle.id
        (folder / CANCELLED).touch()
        pid = int((_read_json(folder / LAUNCHED) or {}).get("pid") or 0)
        if pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)


def _locked(folder: Path) -> bool:
    """Whether a runner holds the batch's lock now."""
    try:
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock taken here
    return False


def _alive(folder: Path) -> bool:
    """Whether the launched runner still exists (it may not have taken its lock yet)."""
    pid = int((_read_json(folder / LAUNCHED) or {}).get("pid") or 0)
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.strip())


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically: a reader sees the whole file or none."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


# -- the runner (its own process) --------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    """``python -m agac.providers.runbatch DIR -- COMMAND…``: detach (a second process in a
    session of its own), print its process id and return; it runs COMMAND once for the
    batch in DIR (see the module docstring)."""
    folder, command = Path(argv[0]), list(argv[2:])
    pid = os.fork()
    if pid:
        print(pid, flush=True)
        return 0
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os._exit(_run(folder, command))


def _run(folder: Path, command: list[str]) -> int:
    """Run ``command`` for the batch in ``folder`` unless it ran or runs already."""
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another runner has this batch
    if (folder / OUTPUT).exists() or (folder / CANCELLED).exists():
        return 0  # done already, or given up: never run the command again
    with (folder / LOG).open("ab") as log:
        try:
            code = subprocess.call(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        except OSError as exc:  # not found, not executable: the batch failed, and says why
            log.write(f"agac: could not run {command[0]!r}: {exc}\n".encode())
            code = 127
    if code == 0 and (folder / PARTIAL).exists():
        os.replace(folder / PARTIAL, folder / OUTPUT)
    _write_json(folder / EXIT, {"code": code})
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
