"""Every reason code a unit can end with: the one registry (nothing silent, S4).

A unit that does not end ``answered`` is ``failed`` or ``skipped`` with one of these
codes, in ``agac status`` (``reasons``), exports, ``agac records`` and the record's
session. Each code has one meaning and is never reused for another. The reason-code
table of docs/reference/reason-codes.md is this registry in prose; a test keeps the two, and the
codes the source actually writes, equal.

``retry`` says whether ``agac retry`` alone can turn the unit into an answer (it asks
the same request again): true for a provider or batch trouble, false where something
else must change first — the input file, the workflow, a person's decision.

``halts`` marks the skips that only say the run stopped before the unit was asked
(budget, deadline, cancel, a batch still out, a decision that ended the run): a fan-out
parent with such an item is skipped with the same reason instead of joined, and a later
run asks those units again — ``carries_over`` is false for them (R1: every other outcome
is kept by the next run of the same workflow). ``ends_run`` is the final state a run
takes when units of its own were skipped with the code (``deadline`` -> ``timed_out``,
``budget_exhausted`` -> ``exhausted``, ``provider_unreachable`` -> ``failed``).

``precedence`` orders the reasons a bulk transition (engine/transitions.py) may give one
unit at once: the highest names its outcome. A run that ends early skips its units with
the stop's reason (0), unless they wait on a batch still out (``batch_outstanding``, 1),
sat in a batch cancelled at the provider (``batch_cancelled``, 2) or have an effect of
unknown outcome (``effect_unknown``, 3) — what is known of the unit outranks why the run
stopped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "HALTING",
    "NOT_CARRIED",
    "REASONS",
    "RUN_ENDING",
    "Bucket",
    "Reason",
    "ReasonCode",
    "reason_code",
    "strongest",
]

Bucket = Literal["failed", "skipped"]
EndState = Literal["timed_out", "exhausted", "failed"]

Reason = Literal[
    # skipped
    "guard",
    "upstream_failed",
    "budget_exhausted",
    "cancelled",
    "deadline",
    "join_atomic",
    "batch_outstanding",
    "run_ended",
    "provider_unreachable",
    # failed
    "invalid_input",
    "duplicate_key",
    "input_changed",
    "render_error",
    "prompt_too_large",
    "fan_out_invalid",
    "tool_error",
    "schema_invalid",
    "check_failed",
    "truncated",
    "refusal",
    "content_filter",
    "unexpected_stop",
    "max_turns_exceeded",
    "max_tool_calls_exceeded",
    "provider_error",
    "batch_refused",
    "batch_not_returned",
    "batch_failed",
    "batch_expired",
    "batch_cancelled",
    "batch_deadline",
    "batch_abandoned",
    "approval_rejected",
    "approval_expired",
    "effect_failed",
    "effect_unknown",
    "attachment_not_found",
    "attachment_unreadable",
    "attachment_outside_project",
    "attachment_not_regular_file",
    "unsupported_attachment",
    "attachment_corrupt",
    "invalid_data_url",
    "attachment_too_large",
    "attachment_not_supported",
    "attachment_changed",
]


@dataclass(frozen=True)
class ReasonCode:
    """One reason code: its bucket, what it means, and what to do about it."""

    code: str
    bucket: Bucket
    meaning: str
    fix: str
    retry: bool
    halts: bool = False
    """A skip that says the run stopped before the unit was asked, not what the unit is."""
    ends_run: EndState | None = None
    """The final state of a run whose own units were skipped with this code."""
    precedence: int = 0
    """Of two reasons that apply to one unit in a bulk transition, the higher names it."""

    @property
    def carries_over(self) -> bool:
        """Whether the next run of the workflow keeps the outcome (R1) instead of asking
        the unit again: every code but the halts."""
        return not self.halts


def _r(
    code: str,
    bucket: Bucket,
    meaning: str,
    fix: str,
    retry: bool,
    *,
    halts: bool = False,
    ends_run: EndState | None = None,
    precedence: int = 0,
) -> ReasonCode:
    return ReasonCode(code, bucket, meaning, fix, retry, halts, ends_run, precedence)


REASONS: dict[str, ReasonCode] = {
    r.code: r
    for r in (
        _r(
            "guard",
            "skipped",
            "the action's `when:` guard was false for this unit (or read a "
            "field the unit does not have)",
            "nothing: this is the workflow saying no",
            False,
        ),
        _r(
            "upstream_failed",
            "skipped",
            "an action this one depends on failed for this unit, or the input record is invalid",
            "fix the upstream failure; `agac retry` re-asks it and "
            "everything skipped because of it",
            True,
        ),
        _r(
            "budget_exhausted",
            "skipped",
            "the run's budget would have been crossed, so the unit was never sent",
            "run again with a larger budget (`--budget-usd`); answers paid for are reused",
            False,
            halts=True,
            ends_run="exhausted",
        ),
        _r(
            "cancelled",
            "skipped",
            "the run was cancelled (`agac cancel`, `--new`, `--fresh`) before the unit was sent",
            "`agac run WF` admits a new run that sends it",
            False,
            halts=True,
        ),
        _r(
            "deadline",
            "skipped",
            "the run's `deadline:` passed before the unit was sent",
            "`agac run WF` admits a new run (with a new deadline) that sends it",
            False,
            halts=True,
            ends_run="timed_out",
        ),
        _r(
            "join_atomic",
            "skipped",
            "a fan-out with `failure: atomic` had a failed item, so its join was not called",
            "fix the failed items; `agac retry` re-asks them and the join",
            True,
        ),
        _r(
            "batch_outstanding",
            "skipped",
            "the run ended while the unit's batch was still out at the provider",
            "`agac run WF`: the next run adopts the batch and collects it",
            False,
            halts=True,
            precedence=1,
        ),
        _r(
            "run_ended",
            "skipped",
            "a decision ended the whole run (`on_reject: fail_run`, "
            "`on_expire: time_out_run`) before the unit was reached",
            "`agac run WF` admits a new run",
            False,
            halts=True,
        ),
        _r(
            "provider_unreachable",
            "skipped",
            "the action's provider could not be reached: a burst of calls in a row failed "
            "the same way (connection refused, a timeout, a broken connection), so the "
            "action was paused and its units not answered yet were not sent",
            "check that the provider is up and reachable (its `base_url` in agac.yml, the "
            "network, a proxy), then `agac run WF`: the next run asks these units again",
            False,
            halts=True,
            ends_run="failed",
        ),
        _r(
            "invalid_input",
            "failed",
            "the input record cannot be read: malformed JSON or CSV, "
            "not an object, bytes that are not UTF-8, no `id_field`, a quote never closed",
            "fix the line the detail names in the input file, then `agac run WF --new`",
            False,
        ),
        _r(
            "duplicate_key",
            "failed",
            "another record earlier in the input has the same key",
            "make `id_field` unique (or drop it to key records by file and line), then "
            "`agac run WF --new`",
            False,
        ),
        _r(
            "input_changed",
            "failed",
            "the input object holding the record changed (its ETag, "
            "version or size) while the run's snapshot was read from it, so the record was not "
            "read rather than read from another version",
            "`agac run WF --new` takes the input as it is now",
            False,
        ),
        _r(
            "render_error",
            "failed",
            "the prompt, system or tool inputs could not be rendered "
            "for this record (typically a field the record does not have)",
            "guard the field "
            "(a `default(...)` filter, `is defined`) or fix the template, then `agac run WF --new`",
            False,
        ),
        _r(
            "prompt_too_large",
            "failed",
            "the rendered system and prompt (or a value the template "
            "builds on the way) are longer than the action's `max_prompt_chars` (default "
            "8,000,000 characters); nothing was sent or stored",
            "shorten what the template "
            "includes for this record, or raise `max_prompt_chars`, then `agac run WF --new`",
            False,
        ),
        _r(
            "fan_out_invalid",
            "failed",
            "the list a fan-out iterates over is missing or not a list for this record",
            "fix the upstream output or the `over:` path, then `agac run WF --new`",
            False,
        ),
        _r(
            "tool_error",
            "failed",
            "the tool function raised (the detail names the exception)",
            "fix the tool (its traceback is in `agac records show KEY`), then `agac retry WF`",
            True,
        ),
        _r(
            "schema_invalid",
            "failed",
            "after the last attempt the answer still did not match the action's `schema`",
            "loosen the schema or the prompt, or `agac retry WF`",
            True,
        ),
        _r(
            "check_failed",
            "failed",
            "the answer failed one of the action's `checks:` (`on_fail: fail`, or "
            "`repair` after its last repair); the detail names the check and why",
            "fix the prompt or the check, then `agac run WF --new`",
            False,
        ),
        _r(
            "truncated",
            "failed",
            "after the last attempt the answer still stopped at `max_tokens`",
            "raise `max_tokens`, then `agac retry WF`",
            True,
        ),
        _r(
            "refusal",
            "failed",
            "the model refused to answer",
            "change the prompt; a retry asks the same thing",
            False,
        ),
        _r(
            "content_filter",
            "failed",
            "the provider's content filter stopped the answer",
            "change the prompt or the input; a retry asks the same thing",
            False,
        ),
        _r(
            "unexpected_stop",
            "failed",
            "the provider stopped for a reason that is not a complete "
            "answer: a stop value agac does not know, a tool call the action did not ask for, a "
            "paused turn that could not be continued (the detail names the provider's value)",
            "read the detail (a gateway in front of the provider, a new stop value); "
            "`agac retry WF` asks again",
            True,
        ),
        _r(
            "max_turns_exceeded",
            "failed",
            "an action with tools asked the model `max_turns` times and it still called "
            "tools rather than answer (the detail names its last call)",
            "raise `max_turns`, or make the prompt or the tools lead to an answer sooner; "
            "then `agac run WF --new`",
            False,
        ),
        _r(
            "max_tool_calls_exceeded",
            "failed",
            "an action with tools reached `max_tool_calls`: the model asked for more calls "
            "than the bound allows (the detail names the call that went over)",
            "raise `max_tool_calls`, or make the prompt ask for fewer calls; then "
            "`agac run WF --new`",
            False,
        ),
        _r(
            "provider_error",
            "failed",
            "the provider refused the request (a 4xx such as an "
            "invalid request, bad credentials, quota) or kept failing until the attempts were "
            "spent",
            "read the detail; fix credentials or quota, then `agac retry WF`",
            True,
        ),
        _r(
            "batch_refused",
            "failed",
            "the provider refused the batch holding the unit's file "
            "(a 4xx, quota or spend cap at submission)",
            "fix what the detail names (quota, size), then `agac run WF`",
            True,
        ),
        _r(
            "batch_not_returned",
            "failed",
            "a finished batch had no result for the unit and the retry attempts were spent",
            "`agac retry WF` sends it again",
            True,
        ),
        _r(
            "batch_failed",
            "failed",
            "the provider reported the unit's batch as failed; nothing was read from it",
            "`agac retry WF` sends the file again",
            True,
        ),
        _r(
            "batch_expired",
            "failed",
            "the unit's batch expired at the provider before it finished",
            "`agac retry WF` sends the file again",
            True,
        ),
        _r(
            "batch_cancelled",
            "failed",
            "the unit's batch was cancelled at the provider (by "
            "`agac cancel`, `agac batch cancel` or someone else)",
            "after `agac cancel`, "
            "`agac run WF` sends it again (the failure is not carried from a cancelled run); "
            "otherwise `agac retry WF`",
            True,
            precedence=2,
        ),
        _r(
            "batch_deadline",
            "failed",
            "the unit's batch passed `batch_deadline`, so agac cancelled it",
            "raise `batch_deadline` if needed, then `agac retry WF`",
            True,
        ),
        _r(
            "batch_abandoned",
            "failed",
            "agac gave up the batch the unit was waiting on (`agac "
            "retry --abandon-in-flight`, `--fresh`, or no longer needed: B0)",
            "the retry that gave it up sends it again; otherwise `agac retry WF`",
            True,
        ),
        _r(
            "approval_rejected",
            "failed",
            "a person rejected the unit's proposal",
            "`agac retry WF` proposes it again",
            True,
        ),
        _r(
            "approval_expired",
            "failed",
            "nobody decided the unit's proposal before it expired",
            "`agac retry WF` proposes it again",
            True,
        ),
        _r(
            "effect_failed",
            "failed",
            "the side effect of a tool action with `effect:` raised",
            "fix the tool or the service it calls, then `agac retry WF`",
            True,
        ),
        _r(
            "effect_unknown",
            "failed",
            "the run was cancelled while the unit's side effect was unknown (started, no receipt)",
            "settle it with `agac effects resolve ID --done` (or `--not-done`)",
            False,
            precedence=3,
        ),
        _r(
            "attachment_not_found",
            "failed",
            "a file the action's `attachments:` name does not "
            "exist (or was there when the request was made and is gone at send time)",
            "put the "
            "file where the path says (relative paths start at the project root), then `agac run "
            "WF --new`",
            False,
        ),
        _r(
            "attachment_unreadable",
            "failed",
            "a file the action attaches cannot be read: a folder, no permission, a symlink loop",
            "fix the path or the file's permissions, then `agac run WF --new`",
            False,
        ),
        _r(
            "attachment_outside_project",
            "failed",
            "an attachment path leads out of the project once resolved (absolute, `../`, or "
            "through a symbolic link) and into no folder the action's `attachment_folders` lists",
            "move the file into the project, or list its folder in `attachment_folders`, then "
            "`agac run WF --new`",
            False,
        ),
        _r(
            "attachment_not_regular_file",
            "failed",
            "an attachment path names a named pipe, a device or a socket, not a regular "
            "file; nothing was read from it",
            "attach a regular file (copy what the pipe or device gives into one), then "
            "`agac run WF --new`",
            False,
        ),
        _r(
            "unsupported_attachment",
            "failed",
            "an attached file is not a PNG, JPEG, WebP, GIF or "
            "PDF by its content (the extension is not what counts), is empty, or is a URL",
            "convert the file, or leave it out of the record, then `agac run WF --new`",
            False,
        ),
        _r(
            "attachment_corrupt",
            "failed",
            "an attached file starts like a PDF or an image but "
            "cannot be read as one (truncated, damaged)",
            "save the file again, then `agac run WF --new`",
            False,
        ),
        _r(
            "invalid_data_url",
            "failed",
            "an attachment is a `data:` URL that is not base64",
            "write it as `data:<media type>;base64,<data>`, then `agac run WF --new`",
            False,
        ),
        _r(
            "attachment_too_large",
            "failed",
            "an attached file (or all of them together) is over "
            "the provider's limit: bytes per file (judged by its size on disk, before it is "
            "read), files per request, pages per PDF",
            "make the "
            "file smaller or split it (docs/providers.md lists the limits), then "
            "`agac run WF --new`",
            False,
        ),
        _r(
            "attachment_not_supported",
            "failed",
            "the action's provider or model cannot take "
            "this kind of file (a PDF to Groq or Ollama, an image to a model without vision)",
            "use a model that takes it, then `agac run WF --new`",
            False,
        ),
        _r(
            "attachment_changed",
            "failed",
            "an attached file changed (or vanished) between the "
            "moment the request was made and its sending; other bytes are never sent under the "
            "old fingerprint",
            "`agac run WF --new` sends the file as it is now",
            False,
        ),
    )
}

assert set(REASONS) == set(get_args(Reason)), "REASONS and Reason list the same codes"

HALTING: frozenset[str] = frozenset(c for c, r in REASONS.items() if r.halts)
"""Skips that say the run stopped before the unit was asked."""

NOT_CARRIED: tuple[str, ...] = tuple(c for c, r in REASONS.items() if not r.carries_over)
"""Outcomes a later run does not keep: it asks those units again."""

RUN_ENDING: tuple[tuple[str, EndState], ...] = tuple(
    sorted(
        ((c, r.ends_run) for c, r in REASONS.items() if r.ends_run is not None),
        key=lambda pair: ("timed_out", "exhausted", "failed").index(pair[1]),
    )
)
"""(reason, the final state it gives a run), in the order of precedence of run states
(``timed_out`` before ``exhausted``; ``cancelled`` is decided before either)."""


def strongest(codes: Iterable[str]) -> str:
    """Of reasons that all apply to one unit, the one that names its outcome: the highest
    ``precedence``, the first given among equals."""
    return max(codes, key=lambda c: REASONS[c].precedence)


def reason_code(code: str) -> ReasonCode | None:
    """The registry entry of ``code``; None for a code this version does not know (a run
    written by a newer agac)."""
    return REASONS.get(code)
