"""Tables. Users own conversations; a conversation owns its numbered events.

The conversation row also carries a projection of its journal (status, last_seq, usage)
that the journal updates in the same transaction as the events, so a list of
conversations never needs to scan events.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("username", sa.String(200), nullable=False, unique=True),
    sa.Column("password_hash", sa.Text, nullable=True),
    sa.Column("is_admin", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    # A disabled account's sessions and tokens stop working; it cannot log in.
    sa.Column("disabled", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
)

conversations = sa.Table(
    "conversations",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column(
        "owner_id", sa.String(40), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("profile", sa.String(100), nullable=False, default="default"),
    sa.Column("approval_mode", sa.String(20), nullable=False, default="ask"),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    # "idle", "failed" (at rest after a failed run), "running" or "waiting_approval"
    sa.Column("status", sa.String(20), nullable=False, default="idle"),
    sa.Column("sandbox_status", sa.String(20), nullable=False, default="none"),
    sa.Column("last_seq", sa.Integer, nullable=False, default=0),
    sa.Column("prompt_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("completion_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("cost", sa.Float, nullable=False, default=0.0),
    # Of the prompt tokens above, those read from and written to the provider's prompt cache.
    sa.Column("cache_read_tokens", sa.BigInteger, nullable=False, default=0, server_default="0"),
    sa.Column("cache_write_tokens", sa.BigInteger, nullable=False, default=0, server_default="0"),
    # Names of the owner's secrets its sandbox's commands get: a JSON list, names only.
    sa.Column("secrets", sa.Text, nullable=False, default="[]", server_default="[]"),
    # `[provider:]model` chosen for this conversation; NULL: the server's model.
    sa.Column("model", sa.String(200), nullable=True),
    # Budget overrides as a JSON object ({tokens?, cost?, steps?, tool_seconds?, total_cost?}).
    sa.Column("budget", sa.Text, nullable=False, default="{}", server_default="{}"),
    # Network policy of its sandbox, "none" or "egress"; NULL (older rows): the server's
    # BURROW_SANDBOX_NETWORK.
    sa.Column("network", sa.String(20), nullable=True),
    sa.Column("environment", sa.String(32), nullable=True),
    # The automation that started it (DESIGN.md §9); NULL: a person did. No foreign key:
    # deleting an automation keeps the conversations it started, still marked.
    sa.Column("automation_id", sa.String(40), nullable=True),
    sa.Index("ix_conversations_owner_updated", "owner_id", "updated_at"),
)

# Work that starts without a person at the keyboard (DESIGN.md §9): a prompt template, what
# it runs on and within, and its triggers. Only a SHA-256 of its fire token is stored.
automations = sa.Table(
    "automations",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column(
        "owner_id", sa.String(40), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("prompt", sa.Text, nullable=False),  # a template: {{field.path}} placeholders
    sa.Column("repo", sa.Text, nullable=True),  # JSON {url, ref?, secret?}; NULL: empty
    sa.Column("environment", sa.String(32), nullable=True),
    sa.Column("model", sa.String(200), nullable=True),
    sa.Column("approval_mode", sa.String(20), nullable=False),
    sa.Column("budget", sa.Text, nullable=False),  # JSON {steps, tokens, cost, wall_seconds}
    sa.Column("result", sa.String(20), nullable=False),  # "none" | "push" | "pull_request"
    sa.Column("attempts", sa.Integer, nullable=True),  # best of N; NULL: one
    sa.Column("triggers", sa.Text, nullable=False, default="[]"),  # JSON list
    sa.Column("token_hash", sa.String(64), nullable=False),
    sa.Column("concurrency", sa.String(10), nullable=False, default="queue"),  # | "skip"
    sa.Column("pull_request", sa.Text, nullable=True),  # JSON {secret?, base?}
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_automations_owner", "owner_id"),
)

# A schedule's tick, claimed by the replica that fires it: the primary key makes the claim
# a compare-and-set, so each (automation, slot) fires once however many replicas tick.
automation_ticks = sa.Table(
    "automation_ticks",
    metadata,
    sa.Column(
        "automation_id",
        sa.String(40),
        sa.ForeignKey("automations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("slot", sa.DateTime(timezone=True), primary_key=True),  # the minute, in UTC
    sa.Column("replica_id", sa.String(200), nullable=False),
)

# What became of each run an automation started: the branch it pushed, the pull request it
# opened (the PR loop finds its conversation by repository and number, or by branch), and a
# failure said in words. Gone with the conversation or the automation.
automation_runs = sa.Table(
    "automation_runs",
    metadata,
    sa.Column(
        "conversation_id",
        sa.String(40),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column(
        "automation_id",
        sa.String(40),
        sa.ForeignKey("automations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("repository", sa.String(200), nullable=True),  # "owner/name", lower case
    sa.Column("branch", sa.String(255), nullable=True),
    sa.Column("pull_number", sa.Integer, nullable=True),
    sa.Column("pull_url", sa.Text, nullable=True),
    sa.Column("commit", sa.String(64), nullable=True),
    # "pending" | "none" | "pushed" | "opened" | "updated" | "failed" | "skipped"
    sa.Column("result_status", sa.String(20), nullable=False, default="pending"),
    sa.Column("result_detail", sa.Text, nullable=True),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_automation_runs_pull", "repository", "pull_number"),
    sa.Index("ix_automation_runs_branch", "repository", "branch"),
    sa.Index("ix_automation_runs_automation", "automation_id"),
)

# GitHub deliveries already taken (X-GitHub-Delivery), so a replayed one starts nothing.
github_deliveries = sa.Table(
    "github_deliveries",
    metadata,
    sa.Column("delivery_id", sa.String(100), primary_key=True),
    sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_github_deliveries_received", "received_at"),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column(
        "conversation_id",
        sa.String(40),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("type", sa.String(40), nullable=False),
    sa.Column("ts", sa.String(32), nullable=False),
    sa.Column("run_id", sa.String(40), nullable=True),
    sa.Column("data", sa.Text, nullable=False),  # JSON text: kept verbatim, never re-encoded
)
# A run's conversation, by its id (an A2A task is a run): one row per run. Its WHERE is
# the migration's (0010): a `postgresql_where` here would load that dialect on every start.
sa.Index("ix_events_run_started", events.c.run_id, sqlite_where=events.c.type == "run.started")

settings = sa.Table(
    "settings",
    metadata,
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("value", sa.Text, nullable=True),  # secrets are stored encrypted (SecretBox)
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)

# Every approval asked, with its answer: the audit trail.
approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("request_id", sa.String(40), primary_key=True),
    sa.Column(
        "conversation_id",
        sa.String(40),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("call_id", sa.String(100), nullable=False),
    sa.Column("tool", sa.String(100), nullable=False),
    sa.Column("arguments_digest", sa.String(64), nullable=False),
    sa.Column("risk", sa.String(20), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("decision", sa.String(20), nullable=True),  # None while waiting
    sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
)

# "Allow for this session": the same tool with the same arguments runs without asking.
grants = sa.Table(
    "grants",
    metadata,
    sa.Column(
        "conversation_id",
        sa.String(40),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("tool", sa.String(100), primary_key=True),
    sa.Column("arguments_digest", sa.String(64), primary_key=True),
    sa.Column("request_id", sa.String(40), nullable=False),
    sa.Column("decision", sa.String(20), nullable=False),
    sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
)

# Browser sessions and CLI tokens: only a SHA-256 of each secret is stored.
sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("token_hash", sa.String(64), primary_key=True),
    sa.Column(
        "user_id", sa.String(40), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("kind", sa.String(10), nullable=False),  # "session" | "api"
    sa.Column("name", sa.String(200), nullable=False, default=""),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),  # None: until revoked
)

# Each user's secrets, by environment variable name; values sealed with the SecretBox.
user_secrets = sa.Table(
    "user_secrets",
    metadata,
    sa.Column(
        "owner_id", sa.String(40), sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)

# Named agent setups a conversation may choose (DESIGN.md §8): a user's own, or shared
# ones (owner_id NULL) that administrators manage and every user sees. A user's profile
# shadows a shared one of the same name.
profiles = sa.Table(
    "profiles",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column(
        "owner_id", sa.String(40), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=True
    ),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("system_prompt", sa.Text, nullable=True),  # NULL: Burrow's own
    sa.Column("model", sa.String(200), nullable=True),
    sa.Column("tools", sa.Text, nullable=True),  # a JSON list of tool names; NULL: all
    sa.Column("skills", sa.Text, nullable=True),  # a JSON list of skill names; NULL: all
    sa.Column("approval_mode", sa.String(20), nullable=True),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_profiles_owner_name", "owner_id", "name", unique=True),
)

# Who runs a conversation's active run, with several replicas on one PostgreSQL
# (docs/scale-out.md): the replica renews `expires_at` while it lives; a lapsed lease is
# taken over by another replica, which repairs the run as crash recovery does.
# Which remote sandbox (an E2B endpoint's id) serves a conversation's sandbox. No foreign
# key: the backend forgets the row when it destroys the sandbox, and a sandbox id is not
# always a conversation's (backend tests).
remote_sandboxes = sa.Table(
    "remote_sandboxes",
    metadata,
    sa.Column("sandbox_id", sa.String(200), primary_key=True),
    sa.Column("remote_id", sa.String(200), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)

run_leases = sa.Table(
    "run_leases",
    metadata,
    sa.Column(
        "conversation_id",
        sa.String(40),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("replica_id", sa.String(200), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_run_leases_replica", "replica_id"),
)

# What a replica asks the owner of a run to do (a message, an interrupt, an approval
# answer): the row is the durable request, a NOTIFY wakes the owner, the owner writes
# `result` and wakes the asker the same way.
run_commands = sa.Table(
    "run_commands",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column(
        "conversation_id",
        sa.String(40),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("target", sa.String(200), nullable=False),  # the owner replica asked
    sa.Column("origin", sa.String(200), nullable=False),  # the replica waiting for the result
    sa.Column("kind", sa.String(20), nullable=False),  # "message" | "interrupt" | "approval"
    sa.Column("body", sa.Text, nullable=False),  # JSON
    sa.Column("result", sa.Text, nullable=True),  # JSON; NULL until the owner answers
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_run_commands_target", "target"),
)

# Failed password checks with several replicas, so the login throttle's limits hold across
# all of them (burrow/api/throttle.py). Rows older than the throttle's window are deleted.
login_failures = sa.Table(
    "login_failures",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    # SHA-256 of the throttle's key ("ip:<addr>", "user:<addr>:<name>"): bounded, and no
    # addresses or usernames at rest.
    sa.Column("key", sa.String(64), nullable=False),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_login_failures_key_at", "key", "at"),
    sa.Index("ix_login_failures_at", "at"),
)
