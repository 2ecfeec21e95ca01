"""A run's stored options decode once into RunSettings and encode back the same."""

from __future__ import annotations

import json

from agac.store.values import Budget, RunSettings, Spent


def test_run_settings_round_trip() -> None:
    settings = RunSettings(
        limit=5,
        prior="r0",
        overrides={"run_mode": "batch"},
        budget=Budget(2.5, None),
        deadline_at=123.0,
        spent_before=Spent(0.5, 10),
    )
    assert RunSettings.from_json(settings.to_json()) == settings
    assert json.loads(settings.to_json())["budget"] == {"usd": 2.5, "tokens": None}


def test_run_settings_read_what_earlier_versions_wrote() -> None:
    old = '{"limit": null, "prior": null, "overrides": {}, "pruned": 9.0}'
    settings = RunSettings.from_json(old)
    assert settings.pruned == 9.0 and settings.budget is None and settings.spent_before == Spent()
