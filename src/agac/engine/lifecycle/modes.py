"""``run_mode: auto``: batch, flex or online, chosen once, when a run is admitted
(decisions 0085 and 0103).

An ``auto`` action runs in batch when its run has at least ``auto_batch_min_records``
units for it and batch can serve it; online below the threshold. Batch cannot serve it
when its provider has no batch API (Ollama's local batch counts as none: it is live calls
anyway), the store cannot resume a batch (``memory``), the action sits in a fan-out gated
``sequential`` (each item would wait for the previous item's batch), or the run's
``deadline`` leaves less than the action's ``batch_deadline`` at the moment of choosing.
Then, at or above the threshold, it runs on the provider's **flex** tier when the provider
serves the action's model there at a lower price than online (the batch rate: OpenAI,
Azure, Gemini — Groq's flex costs the on-demand price), and online otherwise.

The count is the run's input records, times ``versions`` for each ``fan_out: {versions:
N}`` around the action; a ``fan_out: {over: …}`` counts its parent's records (its
lists are not known before the run).

The choice is written into the run's config snapshot — the action's ``run_mode`` becomes
``online``, ``flex`` or ``batch`` and ``auto_choice`` says why — so a continuation, a
worker or a retry of the run executes the same mode; the workflow's ``config_hash`` stays
the file's, so the open run is still recognised as the file's run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from agac.config.actions import BATCH_DEFAULTS
from agac.engine.walk.steps import regions_of
from agac.errors import ConfigError
from agac.providers import registry

if TYPE_CHECKING:
    from agac.config.model import Action, Workflow

__all__ = ["ModeChoice", "auto_units", "choose_mode", "chosen", "keep_choices", "resolve_auto"]

Why = Literal[
    "at_threshold",
    "below_threshold",
    "no_batch_api",
    "deadline",
    "not_durable",
    "sequential_fan_out",
    "as_original",
]


Mode = Literal["online", "flex", "batch"]
MODES: dict[str | None, Mode] = {"online": "online", "flex": "flex", "batch": "batch"}
"""The modes ``auto`` chooses among, by their name in a run's config."""


@dataclass(frozen=True)
class ModeChoice:
    """What ``run_mode: auto`` chose for one action, and why (a code and a sentence).
    ``why`` is the rule that decided: for ``flex`` (and for ``online`` at or above the
    threshold), the reason batch could not serve the action."""

    action: str
    mode: Mode
    why: Why
    detail: str
    units: int

    def as_event(self) -> dict[str, object]:
        return {"mode": self.mode, "why": self.why, "detail": self.detail, "units": self.units}


def choose_mode(
    action: Action,
    units: int,
    *,
    remaining: float | None,
    durable: bool = True,
    sequential: bool = False,
) -> ModeChoice:
    """The mode an ``auto`` action runs in with ``units`` units, when the run's deadline is
    ``remaining`` seconds away (None: no deadline)."""
    threshold = action.auto_batch_min_records or 1
    if units < threshold:
        return ModeChoice(
            action.name,
            "online",
            "below_threshold",
            f"{units:,} units, fewer than auto_batch_min_records {threshold:,}",
            units,
        )
    blocked = _batch_blocked(action, remaining=remaining, durable=durable, sequential=sequential)
    if blocked is None:
        return ModeChoice(
            action.name,
            "batch",
            "at_threshold",
            f"{units:,} units, at least auto_batch_min_records {threshold:,}",
            units,
        )
    why, detail = blocked
    flex, on_flex = _flex_offer(action)
    return ModeChoice(action.name, "flex" if flex else "online", why, f"{detail}; {on_flex}", units)


def _batch_blocked(
    action: Action, *, remaining: float | None, durable: bool, sequential: bool
) -> tuple[Why, str] | None:
    """Why batch cannot serve the action now (a code and a sentence); None when it can."""
    window = action.batch_deadline or BATCH_DEFAULTS["batch_deadline"]
    if not _has_batch_api(action.provider):
        return "no_batch_api", f"provider {action.provider!r} has no batch API"
    if not durable:
        return "not_durable", "the memory store cannot resume a batch"
    if sequential:
        return "sequential_fan_out", "its fan-out is gated sequential"
    if remaining is not None and remaining < window:
        detail = (
            f"the run's deadline is {_hours(remaining)} away, less than "
            f"batch_deadline {_hours(window)}"
        )
        return "deadline", detail
    return None


def _flex_offer(action: Action) -> tuple[bool, str]:
    """Whether the action goes on its provider's flex tier instead (its model served there
    at the batch rate: cheaper than online), and the sentence that says why or why not."""
    provider, model = action.provider or "", action.model_name or ""
    try:
        spec = registry.provider_spec(provider)
    except (ConfigError, ImportError):
        return False, f"provider {provider!r} cannot be loaded"  # validation reported it
    if spec.flex is None:
        return False, f"{provider} has no flex tier"
    if not spec.flex.serves(model):
        return False, f"{provider} does not serve {model} on flex"
    if spec.flex.billed != "batch":
        return False, f"{provider}'s flex tier costs the online price"
    return True, f"{provider} serves {model} on flex at the batch price"


def resolve_auto(
    workflow: Workflow, records: int, *, remaining: float | None, durable: bool = True
) -> tuple[Workflow, list[ModeChoice]]:
    """``workflow`` with every ``auto`` action's mode chosen (its ``config_hash`` kept),
    and the choices made; the workflow itself when it has no ``auto`` action."""
    autos = [a for a in workflow.actions if a.kind == "llm" and a.run_mode == "auto"]
    if not autos:
        return workflow, []
    units = auto_units(workflow, records)
    sequential = _sequential_members(workflow)
    choices = {
        a.name: choose_mode(
            a, units[a.name], remaining=remaining, durable=durable, sequential=a.name in sequential
        )
        for a in autos
    }
    actions = tuple(
        chosen(a, choices[a.name]) if a.name in choices else a for a in workflow.actions
    )
    return replace(workflow, actions=actions), list(choices.values())


def chosen(action: Action, choice: ModeChoice) -> Action:
    """The action as it runs: the chosen mode, its batch tuning only when batch, its flex
    fallback only when flex."""
    batch = choice.mode == "batch"
    return replace(
        action,
        run_mode=choice.mode,
        auto_choice=f"{choice.why}: {choice.detail}",
        poll_interval=action.poll_interval if batch else None,
        batch_deadline=action.batch_deadline if batch else None,
        flex_fallback_after=action.flex_fallback_after if choice.mode == "flex" else None,
    )


def keep_choices(workflow: Workflow, original: Sequence[Action]) -> Workflow:
    """``workflow`` with each ``auto`` action in the mode the run ``original`` (its
    graph's actions) chose for it: a retry runs as the run it retries did."""
    before = {a.name: a for a in original if a.auto_choice}
    actions = []
    for a in workflow.actions:
        old = before.get(a.name)
        if a.run_mode == "auto" and old is not None and old.run_mode in MODES:
            a = chosen(
                a,
                ModeChoice(
                    a.name,
                    MODES[old.run_mode],
                    "as_original",
                    f"as the run it retries chose ({old.auto_choice})",
                    0,
                ),
            )
        actions.append(a)
    return replace(workflow, actions=tuple(actions))


def auto_units(workflow: Workflow, records: int) -> dict[str, int]:
    """Per action, the units a run over ``records`` records has for it: the records, times
    ``versions`` of each enclosing ``fan_out: {versions: N}`` (an ``over`` fan-out counts
    its parent's records)."""
    fan = any(a.fan_out is not None for a in workflow.actions)
    scope = regions_of(workflow.actions).scope if fan else {}
    out = {}
    for action in workflow.actions:
        n = records
        for name in scope.get(action.name, ()):
            spec = workflow.action(name).fan_out
            n *= spec.versions if spec is not None and spec.versions else 1
        out[action.name] = n
    return out


def _sequential_members(workflow: Workflow) -> set[str]:
    """The actions inside a fan-out gated ``sequential``."""
    gated = [a.name for a in workflow.actions if a.fan_out is not None and a.gate == "sequential"]
    if not gated:
        return set()
    members = regions_of(workflow.actions).members
    return {m for name in gated for m in members.get(name, ())}


def _has_batch_api(provider: str | None) -> bool:
    """A provider batch API: Ollama's local batch (live calls) does not count."""
    try:
        return registry.provider_spec(provider or "").batch is not None
    except (ConfigError, ImportError):
        return False  # validation reported it


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"
