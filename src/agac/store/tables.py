"""The store's tables (SQLAlchemy Core), shared by SQLite and PostgreSQL.

Times are epoch seconds (float) so both dialects store them the same way. JSON
payloads are text written with :func:`agac.providers.base.canonical_json`-style
dumps by the repository, so the bytes are identical on both dialects.

Alembic migrations under ``migrations/versions`` must produce exactly these tables;
``tests/integration/store/test_migrations.py`` compares them.
"""

from __future__ import annotations

import sqlalchemy as sa

from agac.store.values import FINAL_STATES
from agac.tenants import DEFAULT_TENANT

metadata = sa.MetaData()


def _tenant() -> sa.Column[str]:
    """The tenant a row belongs to (T2; migration 0009). Always written by agac;
    the server default names the tenant of rows stored before tenants existed."""
    return sa.Column("tenant", sa.String(64), nullable=False, server_default=DEFAULT_TENANT)


runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("workflow", sa.String(200), nullable=False),
    sa.Column("workflow_path", sa.Text, nullable=False),
    sa.Column("state", sa.String(20), nullable=False),
    sa.Column("retry_of", sa.String(32), nullable=True),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("config_hash", sa.String(64), nullable=False),
    sa.Column("snapshot_id", sa.String(64), nullable=False),
    sa.Column("fresh", sa.Boolean, nullable=False, default=False),
    sa.Column("options", sa.Text, nullable=False, default="{}"),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float, nullable=True),
    _tenant(),
)
sa.Index("ix_runs_tenant_workflow", runs.c.tenant, runs.c.workflow, runs.c.created_at)
OPEN_RUN = runs.c.state.not_in(FINAL_STATES)
ux_runs_open = sa.Index(
    "ux_runs_open", runs.c.tenant, runs.c.workflow, unique=True, sqlite_where=OPEN_RUN
)
"""At most one run that is not final per (tenant, workflow) (docs/guarantees.md, Runs), held by the store.
Its PostgreSQL ``WHERE`` is added when a PostgreSQL engine is made
(:func:`agac.store.database.postgres_table_options`): naming a PostgreSQL option here
would import SQLAlchemy's PostgreSQL dialect (~60 ms) in every process, SQLite ones too."""

run_actions = sa.Table(
    "run_actions",
    metadata,
    sa.Column("run_id", sa.String(32), primary_key=True),
    sa.Column("action", sa.String(200), primary_key=True),
    sa.Column("state", sa.String(20), nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("updated_at", sa.Float, nullable=False),
)

snapshots = sa.Table(
    "snapshots",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("files", sa.Text, nullable=False),
    sa.Column("record_count", sa.Integer, nullable=False),
    sa.Column("complete", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

records = sa.Table(
    "records",
    metadata,
    sa.Column("snapshot_id", sa.String(64), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("file", sa.Text, nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("line", sa.Integer, nullable=False),
    sa.Column("payload", sa.Text, nullable=True),
    sa.Column("reason", sa.String(40), nullable=True),
    sa.Column("error", sa.Text, nullable=True),
)
sa.Index("ix_records_key", records.c.snapshot_id, records.c.key)

# The files a snapshot's records attach, as they were at admission: path, hash, size and
# media type, never the bytes (migration 0014).
snapshot_attachments = sa.Table(
    "snapshot_attachments",
    metadata,
    sa.Column("snapshot_id", sa.String(64), primary_key=True),
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("media_type", sa.String(40), nullable=False),
)

outcomes = sa.Table(
    "outcomes",
    metadata,
    sa.Column("run_id", sa.String(32), primary_key=True),
    sa.Column("action", sa.String(200), primary_key=True),
    sa.Column("unit_key", sa.Text, primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("status", sa.String(12), nullable=False),
    sa.Column("reason", sa.String(40), nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
    sa.Column("origin", sa.String(12), nullable=False),
    sa.Column("fingerprint", sa.String(64), nullable=True),
    sa.Column("output", sa.Text, nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("checks", sa.Text, nullable=True),
)
"""``checks``: each check's verdict on the unit's answer, a JSON object of check name →
passed, for an llm action with ``checks:`` (NULL otherwise)."""
sa.Index("ix_outcomes_seq", outcomes.c.run_id, outcomes.c.seq)

answers = sa.Table(
    "answers",
    metadata,
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("provider", sa.String(64), nullable=False),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("request", sa.Text, nullable=False),
    sa.Column("response", sa.Text, nullable=False),
    sa.Column("output", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    _tenant(),
    sa.PrimaryKeyConstraint("tenant", "fingerprint", name="pk_answers"),
)
"""Answers are reused within their tenant only (T2): a tenant never learns from another's."""

tool_results = sa.Table(
    "tool_results",
    metadata,
    sa.Column("input_hash", sa.String(64), nullable=False),
    sa.Column("function", sa.Text, nullable=False),
    sa.Column("output", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    _tenant(),
    sa.PrimaryKeyConstraint("tenant", "input_hash", name="pk_tool_results"),
)

usage = sa.Table(
    "usage",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(32), nullable=False),
    sa.Column("action", sa.String(200), nullable=False),
    sa.Column("unit_key", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("provider", sa.String(64), nullable=False),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("tier", sa.String(8), nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("cached_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("cache_write_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("output_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("cost_usd", sa.Float, nullable=False, default=0.0),
    sa.Column("latency_ms", sa.Float, nullable=False, default=0.0),
    sa.Column("status", sa.String(12), nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("fingerprint", sa.String(64), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    # "unknown": a call that may have been sent but whose outcome never reached the store
    # (a kill, a failed checkpoint), counted at its worst case (S1, docs/cli.md, agac cost); status
    # "unknown" until a later answer to the same request gives it real usage ("priced").
    sa.Column("origin", sa.String(8), nullable=True),
    _tenant(),
    # Part of output_tokens, shown apart; the provider's billed tool uses as JSON
    # ({"web_search": 2}); the provider's request id of the call (migration 0012).
    sa.Column("reasoning_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("server_tools", sa.Text, nullable=True),
    sa.Column("request_id", sa.String(200), nullable=True),
    # The upstream provider a router (OpenRouter) sent the call to (migration 0017).
    sa.Column("served_by", sa.String(64), nullable=True),
)
sa.Index("ix_usage_run", usage.c.run_id, usage.c.action)
sa.Index("ix_usage_unknown", usage.c.origin, usage.c.status)
sa.Index("ix_usage_unit", usage.c.run_id, usage.c.unit_key)

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(32), nullable=False),
    sa.Column("kind", sa.String(40), nullable=False),
    sa.Column("action", sa.String(200), nullable=True),
    sa.Column("unit_key", sa.Text, nullable=True),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)
sa.Index("ix_events_run", events.c.run_id, events.c.id)

leases = sa.Table(
    "leases",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("token", sa.Integer, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
)

# -- batch mode (migration 0002) --------------------------------------------------------

batches = sa.Table(
    "batches",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("workflow", sa.String(200), nullable=False),
    sa.Column("action", sa.String(200), nullable=False),
    sa.Column("file", sa.Text, nullable=False),
    sa.Column("part", sa.Integer, nullable=False),
    sa.Column("provider", sa.String(64), nullable=False),
    sa.Column("provider_batch_id", sa.Text, nullable=True),
    sa.Column("state", sa.String(20), nullable=False),
    sa.Column("raw_status", sa.String(64), nullable=True),
    sa.Column("run_id", sa.String(32), nullable=False),
    sa.Column("collected_by", sa.String(32), nullable=True),
    sa.Column("request_count", sa.Integer, nullable=False),
    sa.Column("meta", sa.Text, nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("submitted_at", sa.Float, nullable=True),
    sa.Column("ended_at", sa.Float, nullable=True),
    sa.Column("deadline_at", sa.Float, nullable=True),
    sa.Column("updated_at", sa.Float, nullable=False),
    _tenant(),
)
sa.Index(
    "ix_batches_workflow", batches.c.tenant, batches.c.workflow, batches.c.action, batches.c.state
)

batch_items = sa.Table(
    "batch_items",
    metadata,
    sa.Column("batch_key", sa.String(160), primary_key=True),
    sa.Column("custom_id", sa.String(64), primary_key=True),
    sa.Column("workflow", sa.String(200), nullable=False),
    sa.Column("action", sa.String(200), nullable=False),
    sa.Column("unit_key", sa.Text, nullable=False),
    sa.Column("file", sa.Text, nullable=False),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("request", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("reason", sa.String(40), nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
    _tenant(),
)
sa.Index(
    "ix_batch_items_unit",
    batch_items.c.tenant,
    batch_items.c.workflow,
    batch_items.c.action,
    batch_items.c.unit_key,
)

# -- effects (migration 0003) -------------------------------------------------------------

effects = sa.Table(
    "effects",
    metadata,
    sa.Column("key", sa.String(160), primary_key=True),
    sa.Column("workflow", sa.String(200), nullable=False),
    sa.Column("action", sa.String(200), nullable=False),
    sa.Column("unit_key", sa.Text, nullable=False),
    sa.Column("function", sa.Text, nullable=False),
    sa.Column("idempotent", sa.Boolean, nullable=False),
    sa.Column("compensate", sa.Text, nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(32), nullable=False),
    sa.Column("arguments", sa.Text, nullable=False),
    sa.Column("receipt", sa.Text, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("resolution", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    _tenant(),
)
sa.Index("ix_effects_workflow", effects.c.tenant, effects.c.workflow, effects.c.state)

# -- approvals (migration 0004) -----------------------------------------------------------

approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("workflow", sa.String(200), nullable=False),
    sa.Column("action", sa.String(200), nullable=False),
    sa.Column("unit_key", sa.Text, nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("run_id", sa.String(32), nullable=False),
    sa.Column("subject", sa.String(64), nullable=False),
    sa.Column("parent", sa.String(32), nullable=True),
    sa.Column("arguments", sa.Text, nullable=False),
    sa.Column("policy_version", sa.String(200), nullable=False),
    sa.Column("approvers", sa.Text, nullable=False),
    sa.Column("proposed_by", sa.Text, nullable=True),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("decided_by", sa.Text, nullable=True),
    sa.Column("decided_at", sa.Float, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("decision_signature", sa.String(64), nullable=True),
    sa.Column("used_by", sa.String(32), nullable=True),
    sa.Column("used_at", sa.Float, nullable=True),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("signature", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    _tenant(),
)
sa.Index(
    "ix_approvals_unit",
    approvals.c.tenant,
    approvals.c.workflow,
    approvals.c.action,
    approvals.c.unit_key,
)
sa.Index("ix_approvals_state", approvals.c.tenant, approvals.c.workflow, approvals.c.state)
sa.Index("ix_approvals_run", approvals.c.run_id, approvals.c.state)

# -- fan-out (migration 0005) -------------------------------------------------------------

fanouts = sa.Table(
    "fanouts",
    metadata,
    sa.Column("run_id", sa.String(32), primary_key=True),
    sa.Column("action", sa.String(200), primary_key=True),
    sa.Column("parent_key", sa.Text, primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("items", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)
sa.Index("ix_fanouts_seq", fanouts.c.run_id, fanouts.c.seq)

# -- scale-out workers (migration 0006) ---------------------------------------------------

shards = sa.Table(
    "shards",
    metadata,
    sa.Column("run_id", sa.String(32), primary_key=True),
    sa.Column("shard", sa.String(500), primary_key=True),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("action", sa.String(200), nullable=True),
    sa.Column("file", sa.Text, nullable=False),
    sa.Column("lo", sa.Integer, nullable=False),
    sa.Column("hi", sa.Integer, nullable=False),
    sa.Column("state", sa.String(8), nullable=False),
    sa.Column("ready_at", sa.Float, nullable=False),
    sa.Column("owner", sa.String(64), nullable=True),
    sa.Column("claims", sa.Integer, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)
sa.Index("ix_shards_ready", shards.c.state, shards.c.ready_at)

workers = sa.Table(
    "workers",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("concurrency", sa.Integer, nullable=False),
    sa.Column("state", sa.String(12), nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
)

rate_limits = sa.Table(
    "rate_limits",
    metadata,
    sa.Column("key", sa.String(300), primary_key=True),
    sa.Column("updated_at", sa.Float, nullable=False),
)

rate_events = sa.Table(
    "rate_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(300), nullable=False),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("requests", sa.Integer, nullable=False),
    sa.Column("tokens", sa.Integer, nullable=False),
)
sa.Index("ix_rate_events_key_at", rate_events.c.key, rate_events.c.at)

# -- dispatch marks (migration 0007) --------------------------------------------------

dispatch_marks = sa.Table(
    "dispatch_marks",
    metadata,
    sa.Column("run_id", sa.String(32), primary_key=True),
    sa.Column("action", sa.String(200), primary_key=True),
    sa.Column("shard", sa.String(500), primary_key=True),
    # JSON list of [unit key, fingerprint, input tokens, output tokens, worst-case USD]:
    # the units that may have been sent and have no durable outcome yet (S1).
    sa.Column("units", sa.Text, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)
# -- people: users, their groups, API tokens, web sessions (migration 0008) ----------------
# Secrets never enter the store in the clear: a password is an Argon2 hash, a token and a
# session id are SHA-256 hashes of random values the user alone holds (T1).

users = sa.Table(
    "users",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("password_hash", sa.Text, nullable=False),
    sa.Column("tenants", sa.Text, nullable=False),
    sa.Column("admin", sa.Boolean, nullable=False),
    sa.Column("active", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

user_groups = sa.Table(
    "user_groups",
    metadata,
    sa.Column("group_name", sa.String(200), primary_key=True),
    sa.Column("user_name", sa.String(200), primary_key=True),
)
sa.Index("ix_user_groups_user", user_groups.c.user_name)

tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("user_name", sa.String(200), nullable=False),
    sa.Column("secret_hash", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float, nullable=True),
    sa.Column("last_used_at", sa.Float, nullable=True),
)
sa.Index("ix_tokens_user", tokens.c.user_name)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("user_name", sa.String(200), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_seen_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float, nullable=True),
)
sa.Index("ix_sessions_user", sessions.c.user_name)

# -- turns of a tool loop (migration 0016) ---------------------------------------------------
# A unit of an llm action with tools is a conversation: each model turn that called tools
# and each tool result is a row, written before the next step (so a crash resumes at the
# first step not stored). ``step`` orders a unit's rows; a model turn's calls take the
# steps right after it, in the order the model wrote them. ``body`` is JSON: a model turn's
# text, calls and request fingerprint; a tool result's call id, name, arguments, output
# or error, and latency.
turns = sa.Table(
    "turns",
    metadata,
    sa.Column("run_id", sa.String(32), primary_key=True),
    sa.Column("action", sa.String(200), primary_key=True),
    sa.Column("unit_key", sa.Text, primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    _tenant(),
)
