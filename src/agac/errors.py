"""The one error root of agac.

Tree::

    AgacError                       base of everything agac raises on purpose
    ├── ConfigError                 bad agac.yml or workflow; carries located Problems (exit 2)
    ├── UsageError                  a command that cannot be done as asked (exit 2)
    │   ├── RefusedError            refused by a rule (retry while a run is open, ...)
    │   │   ├── DecisionRefused     a decision on a proposal refused; ``code`` says which rule
    │   │   │   └── NotAnApprover   the deciding user may not decide on it (A3, T3)
    │   │   ├── NotAllowed          the signed-in user may not do this (T3, T4)
    │   │   └── ProtectedFile       ``--out`` names a file agac must not overwrite (X1)
    │   ├── NotFound                no such object, or another tenant's (T2: never "forbidden")
    │   └── InputObjectsChanged     an open run's input objects changed since it was admitted
    ├── StoreError                  the store could not be read or written (S2: stop, exit 1)
    │   ├── StoreGone               the store's file was deleted or replaced under the process (S7)
    │   └── LeaseLost               our fencing token is stale: another owner took the run
    │       └── LeaseTaken          another process took the storage point (412 on head, exit 75)
    ├── Paused                      the run cannot move now; run again later (exit 75)
    │   └── LeaseHeld               a live process owns the run
    ├── ProviderError               a provider call failed; ``kind`` is the taxonomy class (docs/providers.md)
    │   ├── WaitError               come back after ``retry_after`` seconds, no attempt spent
    │   ├── RetryableError          spend an attempt, back off with jitter; a tool raises it
    │   │   │                       (``agac.RetryableError``) to ask for another attempt
    │   │   └── TransportError      the provider could not be reached, or the connection
    │   │                           broke or timed out (a burst of identical ones pauses
    │   │                           the action: ``provider_unreachable``)
    │   ├── FatalError              fail the unit (``provider_error``), no retries
    │   │   └── AttachmentError     a file the request attaches cannot be sent as it is
    │   │                           (missing, changed, unsupported, too large…); ``reason``
    │   │                           is its reason code, raised when the request is made or
    │   │                           read again when it is sent — before anything goes out
    │   ├── UnsupportedError        this provider/model cannot do it; stop at once
    │   └── BatchNotEnded           asked right before reading, the batch has no results to
    │                               read (failed, expired, cancelled, or not ended): B7
    └── ToolError                   a tool function raised (fails the unit, ``tool_error``)

A tool's exceptions are user code's: any of them (``SystemExit`` included) fails only
its unit, at once unless it is a ``RetryableError`` (see ``agac.usercode``).

Every class's docstring is its default message. Adapters translate third-party
errors at their boundary with ``raise ... from exc``; nothing above ``providers/``
or ``store/`` sees an SDK or driver exception.

Every error has a stable ``code`` (``agac … --json`` prints it as ``error.code``), an
optional ``hint`` (the fix, when the message does not already end with it) and, when it
stopped a run that exists, that run's ``run_id`` (the CLI then prints the run's summary
with the error).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AgacError",
    "AttachmentError",
    "BatchNotEnded",
    "ConfigError",
    "DecisionRefused",
    "FatalError",
    "InputObjectsChanged",
    "LeaseHeld",
    "LeaseLost",
    "LeaseTaken",
    "NotAllowed",
    "NotAnApprover",
    "NotFound",
    "Paused",
    "Problem",
    "ProtectedFile",
    "ProviderError",
    "RefusedError",
    "RetryableError",
    "StoreError",
    "StoreGone",
    "ToolError",
    "TransportError",
    "UnsupportedError",
    "UsageError",
    "WaitError",
]


class AgacError(Exception):
    """agac failed."""

    exit_code = 1
    code = "error"
    #: The run this error stopped, when one exists (set where the run is known).
    run_id: str | None = None

    def __init__(self, message: str | None = None, *, hint: str | None = None) -> None:
        super().__init__(message or (type(self).__doc__ or "").strip().splitlines()[0])
        self.hint = hint

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Problem:
    """One located finding of validation.

    ``severity`` is ``error`` or ``warning``; ``code`` is a stable code of docs/workflow-reference.md;
    ``file`` and ``line`` point at the offending node (line is 1-based, 0 if unknown).
    """

    code: str
    message: str
    file: str = ""
    line: int = 0
    severity: str = "error"
    hint: str | None = None
    path: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        text = f"{where}: {self.severity}: {self.message} [{self.code}]"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "severity": self.severity,
            "hint": self.hint,
            "path": self.path,
        }


class ConfigError(AgacError):
    """The configuration is not valid."""

    exit_code = 2
    code = "config_error"

    def __init__(self, message: str | None = None, problems: list[Problem] | None = None) -> None:
        self.problems: list[Problem] = list(problems or [])
        if message is None and self.problems:
            message = "; ".join(p.render() for p in self.problems if p.severity == "error")
        super().__init__(message)


class UsageError(AgacError):
    """The command cannot be done as asked."""

    exit_code = 2
    code = "usage_error"


class RefusedError(UsageError):
    """The command was refused."""

    code = "refused"


class InputObjectsChanged(UsageError):
    """The objects of an open run's input changed since the run was admitted; the message
    names them (finish the run with them restored, or take the input as it is now with
    ``--new``)."""

    code = "input_changed"


class DecisionRefused(RefusedError):
    """The decision was refused."""

    code = "approval_refused"

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code
        """``approval_replayed`` (already decided), ``approval_stale`` (revised, withdrawn,
        revoked), ``approval_expired``, ``approval_altered``, ``approval_changed`` (another
        decision won the race), ``not_an_approver``."""


class NotAnApprover(DecisionRefused):
    """The deciding user is not an approver of this proposal."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "not_an_approver")


class NotAllowed(RefusedError):
    """The signed-in user may not do this."""

    code = "not_allowed"


class ProtectedFile(RefusedError):
    """This file must not be overwritten by an export (the store, a workflow's input)."""

    code = "protected_file"


class NotFound(UsageError):
    """No such object here (or it belongs to a tenant the caller is not in)."""

    code = "not_found"


class StoreError(AgacError):
    """The store could not be read or written; the run stopped with its last good checkpoint."""

    exit_code = 1
    code = "store_error"


class StoreGone(StoreError):
    """The store's file was deleted or replaced while this process had it open."""

    code = "store_gone"


class LeaseLost(StoreError):
    """Another process took over this run; this process stops writing."""

    code = "lease_lost"


class LeaseTaken(LeaseLost):
    """Another process took over the storage point; this process stopped before any effect."""

    exit_code = 75


class Paused(AgacError):
    """The run cannot move now; run the same command again later."""

    exit_code = 75
    code = "paused"


class LeaseHeld(Paused):
    """The run is owned by another live process."""

    code = "lease_held"


class ProviderError(AgacError):
    """The provider call failed."""

    kind = "retryable"

    def __init__(
        self,
        message: str | None = None,
        *,
        status: int | None = None,
        code: str | None = None,
        retry_after: float | None = None,
        reason: str | None = None,
        hint: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        # The provider's id of the failed call (``request-id``, ``x-request-id``, or the
        # error body's ``request_id``): what its support asks for.
        self.request_id = request_id
        # The provider's own error code (``insufficient_quota``); the CLI reports every
        # ProviderError as ``provider_error``.
        self.code = code  # type: ignore[assignment]
        self.retry_after = retry_after
        # The reason code an outcome gets when this error is final (docs/guarantees.md, Reason codes).
        self.reason = reason or (
            "provider_error" if self.kind in ("fatal", "unsupported") else None
        )


class WaitError(ProviderError):
    """The provider asked us to come back later."""

    kind = "wait"


class RetryableError(ProviderError):
    """The call failed in a way that may pass on another attempt.

    Raised by adapters for the retryable class of docs/providers.md, and by tools
    (``raise agac.RetryableError("the service is busy", retry_after=5)``) to ask for
    another attempt within the action's ``retry.max_attempts``; every other exception a
    tool raises fails its unit at once.
    """

    kind = "retryable"


class TransportError(RetryableError):
    """The provider could not be reached, or the connection broke or timed out."""


class FatalError(ProviderError):
    """The provider refused the request; retrying will not help."""

    kind = "fatal"


class AttachmentError(FatalError):
    """An attachment cannot be sent as it is."""

    def __init__(self, *, reason: str, message: str, hint: str | None = None) -> None:
        super().__init__(message, reason=reason, code=reason, hint=hint)


class UnsupportedError(ProviderError):
    """This provider or model cannot do what is asked."""

    kind = "unsupported"


class BatchNotEnded(ProviderError):
    """The batch has no results to read."""

    kind = "fatal"

    def __init__(self, message: str, *, state: str, raw_status: str) -> None:
        super().__init__(message)
        self.state = state
        """The normalized state the provider reported (``failed``, ``expired``,
        ``cancelled``, or ``running``/``cancelling`` for one that has not ended)."""
        self.raw_status = raw_status


class ToolError(AgacError):
    """The tool function raised."""

    code = "tool_error"

    def __init__(self, message: str | None = None, traceback_text: str = "") -> None:
        super().__init__(message)
        self.traceback_text = traceback_text
