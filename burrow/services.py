"""The composition root: open the store, pick the sandbox backend and model, build the runtime.

Everything is constructed here and passed down explicitly; nothing below reads globals.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from burrow.automations.repos import repo_source
from burrow.automations.results import Results
from burrow.automations.runner import AutomationRunner
from burrow.automations.schedule import Scheduler
from burrow.backends import make_backend
from burrow.config import Settings
from burrow.llm.base import Pricing, Provider
from burrow.llm.factory import Endpoint, ModelConfig
from burrow.llm.stalls import StallLimits
from burrow.preview_hosts import PreviewHosts
from burrow.runs.conversations.actions import Actions
from burrow.runs.conversations.assembly import RuntimeOptions
from burrow.runs.conversations.leases import RunOwnership
from burrow.runs.conversations.model_choice import ModelSettings
from burrow.runs.conversations.replicas import Replica, default_replica_id
from burrow.runs.conversations.runtime import Runtime
from burrow.runs.conversations.secrets import ConversationSecrets, MaskingEventStore
from burrow.runs.conversations.service import Conversations
from burrow.runs.journal.journal import Journal
from burrow.runs.loop.hooks.approvals import ApprovalGate
from burrow.runs.loop.hooks.budget import Budget
from burrow.runs.loop.loop import LoopConfig
from burrow.runs.loop.window import context_window
from burrow.runs.workspace.environments import Environments
from burrow.runs.workspace.git.repo_import import RepoImports
from burrow.runs.workspace.repo_setup import RepoSetups
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.sandbox.backend import Backend
from burrow.sandbox.masking import SecretMask
from burrow.store import datadir
from burrow.store.accounts import AccountStore
from burrow.store.approvals import ApprovalStore
from burrow.store.commands import CommandStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.forks import ForkStore
from burrow.store.leases import LeaseStore
from burrow.store.login_failures import LoginFailureStore
from burrow.store.migrate import open_database
from burrow.store.notify import asyncpg_dsn
from burrow.store.profiles import ProfileStore
from burrow.store.records import User
from burrow.store.remote_sandboxes import RemoteSandboxStore
from burrow.store.secrets import Redactor, SecretBox, install_redaction
from burrow.store.settings import SettingsStore
from burrow.store.user_secrets import UserSecretStore
from burrow.telemetry.setup import Telemetry, open_telemetry
from burrow.tools.a2a.delegate import DelegateTool
from burrow.tools.base import Tool, ToolLimits
from burrow.tools.mcp.connections import McpConnections
from burrow.tools.mcp.outbound import UrlPolicy
from burrow.tools.registry import default_tools

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

ADMIN = "admin"


@dataclass
class Services:
    settings: Settings
    db: Database
    accounts: AccountStore
    conversations: Conversations  # the API's one door to conversations and their runs
    journal: Journal
    runtime: Runtime
    models: ModelSettings
    owner: User  # the admin: owner of what `burrow run` creates
    secrets: ConversationSecrets
    imports: RepoImports
    profiles: ProfileStore
    environments: Environments
    on_close: Callable[[], None] = lambda: None
    telemetry: Telemetry = field(default_factory=open_telemetry)
    mcp: McpConnections | None = None
    replica: Replica | None = None  # several replicas on PostgreSQL: leases, LISTEN
    login_failures: LoginFailureStore | None = None  # the login throttle's, shared by replicas
    automations: AutomationRunner | None = None  # set by open_services
    scheduler: Scheduler | None = None  # set by open_services, started by the server

    async def close(self) -> None:
        self.on_close()
        if self.scheduler is not None:
            await self.scheduler.close()
        if self.automations is not None:
            await self.automations.close()
        await self.environments.close()
        await self.imports.close()
        await self.runtime.shutdown()  # its runs end and give their leases back
        if self.replica is not None:
            await self.replica.close()
        await self.db.close()
        self.telemetry.close()
        self.accounts.passwords.close()


def model_config(settings: Settings) -> ModelConfig:
    return ModelConfig(
        model=settings.model,
        api_key=settings.openai_api_key,
        base_url=settings.openai_base_url,
        anthropic=Endpoint(settings.anthropic_api_key, settings.anthropic_base_url),
        prices=Pricing(
            settings.price_prompt,
            settings.price_completion,
            cache_read=settings.price_cache_read,
            cache_write=settings.price_cache_write,
        ),
        limits=StallLimits(settings.model_first_token_timeout, settings.model_idle_timeout),
        thinking_budget=settings.thinking_budget,
    )


async def open_services(
    settings: Settings,
    *,
    provider: Callable[[], Provider] | None = None,
    tools: dict[str, Tool] | None = None,
    backend: Backend | None = None,
    span_processor: SpanProcessor | None = None,
) -> Services:
    datadir.prepare(settings.data_dir)
    db = await open_database(settings.database(), migrate=settings.auto_migrate)
    conversations = ConversationStore(db)
    redactor = Redactor()
    uninstall_redaction = install_redaction(redactor)
    box = SecretBox.for_data_dir(settings.data_dir, settings.secret_key)
    chosen_secrets = ConversationSecrets(UserSecretStore(db, box))
    redactor.mask_log_with(chosen_secrets.mask_everywhere)
    # On PostgreSQL this process is one replica among any number: its commits NOTIFY the
    # others, runs hold leases (docs/scale-out.md). SQLite is one process.
    replicated = db.engine.dialect.name == "postgresql"
    replica_id = settings.replica_id or default_replica_id()
    journal = Journal(
        MaskingEventStore(
            db, redactor, chosen_secrets, announce_as=replica_id if replicated else None
        ),
        shared=replicated,
    )
    leases = LeaseStore(db, replica_id, settings.run_lease_seconds)
    telemetry = open_telemetry(span_processor)
    journal.observers.append(telemetry.timeline)
    profiles = ProfileStore(db)
    models = ModelSettings(
        model_config(settings),
        SettingsStore(db),
        box,
        redactor,
        env_key_any_url=settings.provider_env_key_any_url,
        process_source=settings.model_source,
        fallback=settings.default_model,
    )
    await models.load()
    backend = backend or make_backend(settings, remote_ids=RemoteSandboxStore(db))
    environments = Environments(SettingsStore(db), backend, network=settings.sandbox_network)
    sandboxes = SandboxPool(
        backend,
        journal,
        idle_seconds=settings.sandbox_idle_hibernate_seconds,
        owner_of=conversations.owner_of,
        max_per_owner=settings.max_sandboxes_per_user,
        for_commands=chosen_secrets.sandbox,
        network_of=conversations.network_of,
        disk_mb_per_owner=settings.max_disk_mb_per_user,
        conversations_of=conversations.ids_of,
        environments=environments,
        environment_of=conversations.environment_of,
    )
    setups = RepoSetups(journal, sandboxes, SettingsStore(db))
    sandboxes.disk_cache = setups  # kept setups count toward a user's disk, and go first
    imports = RepoImports(journal, sandboxes, setups=setups, conversation_of=conversations.get)
    mcp = mcp_connections(settings, sandboxes, UserSecretStore(db, box))
    runtime = Runtime(
        journal,
        conversations,
        sandboxes,
        tools if tools is not None else {**default_tools(), **delegate_tool(settings, db, box)},
        provider or models.provider,
        ApprovalGate(ApprovalStore(db), conversations, remember_modes=not replicated),
        runtime_options(
            settings,
            models,
            profiles,
            own_provider=provider is not None,
            before_run=imports.wait,
            mcp=mcp,
            ownership=leases if replicated else None,
            request_mask=chosen_secrets.mask_for,
        ),
    )
    telemetry.metrics.add_gauge(
        "burrow_sandboxes", "Sandboxes by status", "status", runtime.sandboxes.statuses
    )
    replica = None
    if replicated:
        replica = Replica(
            runtime, journal, leases, CommandStore(db, replica_id), asyncpg_dsn(settings.database())
        )
        await replica.start()  # listening before recovery: commands may come at once
    await runtime.recover()
    await runtime.sandboxes.recover()
    await environments.load()  # those not built yet build in the background
    accounts = AccountStore(db)
    owner = await ensure_admin(accounts, settings.admin_password)
    actions = Actions(runtime, replica.owner_actions if replica else None)
    services = Services(
        settings,
        db,
        accounts,
        Conversations(
            conversations,
            runtime,
            actions,
            imports,
            chosen_secrets,
            models,
            profiles,
            ForkStore(db),
            settings.sandbox_network,
        ),
        journal,
        runtime,
        models,
        owner,
        chosen_secrets,
        imports,
        profiles,
        environments,
        uninstall_redaction,
        telemetry,
        mcp,
        replica,
        LoginFailureStore(db) if replicated else None,
    )
    services.automations = runner = AutomationRunner(db, services.conversations)
    runner.on_done = Results(services.conversations, chosen_secrets, settings, runner.store).finish
    services.scheduler = Scheduler(runner, replica_id, lambda a: repo_source(chosen_secrets, a))
    return services


def runtime_options(
    settings: Settings,
    models: ModelSettings,
    profiles: ProfileStore,
    *,
    own_provider: bool,
    before_run: Callable[[str], Awaitable[None]],
    mcp: McpConnections,
    ownership: RunOwnership | None,
    request_mask: Callable[[str], Awaitable[SecretMask]],
) -> RuntimeOptions:
    """What every run is assembled with, from the settings; `own_provider`: the caller gave
    one provider for every run (tests, `burrow run`), so no conversation chooses its model."""
    return RuntimeOptions(
        limits=ToolLimits(
            live_output_rate=settings.tool_output_live_rate,
            live_output_max=settings.tool_output_live_max,
        ),
        pricing=models,  # the price table entry of the chosen model, or BURROW_PRICE_*
        loop=LoopConfig(),
        budget=Budget(
            tokens=settings.run_max_tokens,
            cost=settings.run_max_cost,
            steps=settings.run_max_steps,
            tool_seconds=settings.run_max_tool_seconds,
            wall_seconds=settings.run_max_wall_seconds,
        ),
        preview_url=PreviewHosts.from_settings(settings).url,
        max_runs_per_user=settings.max_runs_per_user,
        max_subagents=settings.run_max_subagents,
        profiles=profiles,
        skills_dir=settings.data_dir / "skills",
        models=None if own_provider else models,  # a conversation's own model, if it chose one
        context_window=lambda chosen: context_window(
            chosen or models.config.model, settings.context_window or models.window_for(chosen)
        ),
        compact_at=settings.compact_at,
        checkpoint_max_file_bytes=int(settings.checkpoint_max_file_mb * 1024 * 1024),
        before_run=before_run,
        tool_sources=[mcp],
        checkpoint_max_count=settings.checkpoint_max_count,
        checkpoint_max_bytes=settings.checkpoint_max_bytes,
        ownership=ownership,
        request_mask=request_mask,
    )


def mcp_connections(
    settings: Settings, sandboxes: SandboxPool, secrets: UserSecretStore
) -> McpConnections:
    async def secrets_of(cid: str) -> tuple[str, dict[str, str]] | None:
        found = await secrets.of_conversation(cid)
        if found is None:
            return None
        return found.owner_id, {n: found.values[n] for n in found.chosen if n in found.values}

    return McpConnections(
        settings.data_dir,
        sandbox=sandboxes.get,
        secrets_of=secrets_of,
        policy=UrlPolicy(
            settings.mcp_allow_urls.split(","),
            own_ports={settings.port, settings.preview_listen_port()},
        ),
        connect_timeout=settings.mcp_connect_timeout,
        idle_seconds=settings.sandbox_idle_hibernate_seconds or None,
    )


def delegate_tool(settings: Settings, db: Database, box: SecretBox) -> dict[str, Tool]:
    store = UserSecretStore(db, box)

    async def secrets_of(cid: str) -> dict[str, str] | None:
        found = await store.of_conversation(cid)
        return None if found is None else found.values

    tool = DelegateTool(
        UrlPolicy(
            settings.a2a_allow_urls.split(","),
            own_ports={settings.port, settings.preview_listen_port()},
            setting="BURROW_A2A_ALLOW_URLS",
        ),
        secrets_of,
        timeout=settings.a2a_timeout,
        token_secret=settings.a2a_token_secret,
    )
    return {tool.spec.name: tool}


async def ensure_admin(accounts: AccountStore, password: str | None) -> User:
    """The first admin: BURROW_ADMIN_PASSWORD, or a generated password printed once."""
    admin = await accounts.get_or_create(ADMIN, is_admin=True)
    if not await accounts.has_password(admin.id):
        chosen = password or secrets.token_urlsafe(12)
        await accounts.set_password(admin.id, chosen)
        if not password:
            print(
                f"Burrow: first start. Log in as '{ADMIN}' with password: {chosen}\n"
                "        (shown once; set BURROW_ADMIN_PASSWORD to choose it)",
                file=sys.stderr,
                flush=True,
            )
    return admin
