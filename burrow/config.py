"""Settings, read from the environment (and overridden by command-line flags)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from burrow.tools.output import LIVE_BYTES_PER_SECOND, LIVE_MAX_BYTES


def default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "burrow"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BURROW_", extra="ignore")

    data_dir: Path = Field(default_factory=default_data_dir)
    """Holds the database, the workspaces and the secrets."""
    database_url: str | None = None
    """SQLAlchemy async URL; default: SQLite in the data directory."""
    auto_migrate: bool = True
    """Upgrade the database's schema on start; false: refuse to start until
    `burrow db upgrade` has (for deployments that migrate as a step of their own)."""
    host: str = "127.0.0.1"
    port: int = 8420
    preview_port: int | None = None
    """Defaults to port + 1."""
    preview_domain: str | None = None
    """Wildcard domain of the previews (`{port}-{cid}.<domain>`), e.g. `preview.example.com`
    (then served as https on the default port) or `http://preview.lan:8421`; default:
    `preview.localhost` on the preview port."""
    preview_token_ttl: float = 120.0
    """Seconds a signed preview link stays valid; it is exchanged for a cookie on first use."""
    model: str | None = None
    """`[provider:]model`: `openai:<model>` (the default without a prefix: any
    OpenAI-compatible server), `anthropic:<model>`, `demo`, or `scripted:<file.json>`.
    Set (`--model` or BURROW_MODEL), it wins over the model saved on the settings page."""
    model_source: str = "BURROW_MODEL"
    """Where `model` came from, for the banner: the command line sets `--model`."""
    default_model: str | None = None
    """The model used when none is set by `--model`, BURROW_MODEL or the settings page
    (`make run` sets `demo` when no key is set)."""
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "BURROW_OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL", "BURROW_OPENAI_BASE_URL")
    )
    anthropic_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_API_KEY", "BURROW_ANTHROPIC_API_KEY"),
    )
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "BURROW_ANTHROPIC_BASE_URL"),
    )
    provider_env_key_any_url: bool = False
    """Send `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` also to a base URL changed on the settings
    page; default: only to `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` (or the provider's own
    API), so a web administrator cannot read the operator's key from a server of theirs."""
    model_first_token_timeout: float = 180.0
    """Seconds a model may take to start answering before the call is retried."""
    model_idle_timeout: float = 120.0
    """Seconds a model's stream may stay silent mid-answer: then it is retried if nothing
    was shown yet, else the run fails keeping the text shown."""
    thinking_budget: int = 4096
    """Tokens of extended thinking per Anthropic answer (at least 1024); 0 turns it off."""
    price_prompt: float = 0.0
    """Dollars per million prompt tokens, for the cost shown with usage; 0: the price table
    of known models."""
    price_completion: float = 0.0
    price_cache_read: float | None = None
    """Dollars per million prompt tokens read from the cache; default: the provider's
    share of the prompt price (Anthropic 0.1, OpenAI 0.5)."""
    price_cache_write: float | None = None
    """Dollars per million prompt tokens written to the cache (Anthropic 1.25x)."""
    context_window: int | None = Field(default=None, ge=1)
    """Tokens of the model's context window; default: the model catalog's entry (128,000
    for a model it does not know)."""
    compact_at: float = Field(default=0.8, gt=0.0, le=1.0)
    """Share of the context window past which the older turns are summarized before the
    next request (compaction)."""
    # A limit of zero, below it or infinite is refused at start: it would stop every run
    # at once (or never) while looking like a setting that works.
    run_max_steps: int | None = Field(
        default=50,
        ge=1,
        validation_alias=AliasChoices("BURROW_RUN_MAX_STEPS", "BURROW_MAX_STEPS"),
    )
    """Model calls per run before it ends `budget_exceeded` (a new message continues)."""
    run_max_tokens: int | None = Field(default=None, ge=1)
    """Prompt + completion tokens per run; unset: no limit."""
    run_max_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Dollars per run, priced with BURROW_PRICE_*; unset: no limit."""
    run_max_tool_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds tools may run per run (approval waits excluded); unset: no limit."""
    run_max_wall_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds a run may take from start to end (approval waits excluded); unset: no limit."""
    run_max_subagents: int = Field(default=8, ge=0)
    """Subagents (`task` calls) one run may start; they count against its budget; 0: the
    model is not offered the task tool."""
    checkpoint_max_file_mb: float = Field(default=10.0, gt=0)
    """Files larger than this (MB) are left out of workspace checkpoints (a diff names them)."""
    checkpoint_max_count: int = Field(default=50, ge=1)
    """Checkpoints kept per conversation; past it the oldest are pruned."""
    checkpoint_max_bytes: int = Field(default=1024 * 1024 * 1024, ge=0)
    """Bytes a conversation's checkpoints may take (the workspace disk counts them too);
    past it the oldest are pruned, the newest always stays; 0 = no limit but the disk."""
    upload_max_mb: float = 25.0
    """Largest file `POST .../uploads` takes, in MB; counted while it streams in."""
    upload_extract_max_mb: float = Field(default=1024.0, gt=0)
    """An extracted archive's total uncompressed size, in MB (a zip bomb stops here)."""
    upload_extract_max_files: int = Field(default=20_000, gt=0)
    """Files and folders an extracted archive may hold."""
    file_save_max_mb: float = Field(default=10.0, gt=0)
    """Largest file `PUT .../files/content` (the Files editor) saves, in MB."""
    admin_password: str | None = None
    """The first admin's password (user `admin`); generated and printed once when unset."""
    log_format: Literal["text", "json"] = "text"
    """Server log lines: text, or JSON lines; both carry the conversation and run ids."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    metrics_token: str | None = None
    """Bearer token that may scrape `GET /metrics` (an admin's session or token may too)."""
    secret_key: str | None = None
    """Fernet key that encrypts stored secrets; default: secret.key in the data directory."""
    sandbox: str = "local"
    """Sandbox backend by name: `local` (bubblewrap namespaces on this machine) or `e2b`
    (an E2B endpoint through the e2b SDK and its `E2B_*` variables; the `e2b` extra)."""
    e2b_template: str = ""
    """The e2b backend's sandbox template; empty: the SDK's default (`base`)."""
    e2b_timeout: int = Field(default=3600, gt=0)
    """Seconds an E2B sandbox lives without a renewal (each start or wake renews it)."""
    e2b_hibernation: Literal["memory", "files"] = "memory"
    """What an idle E2B sandbox keeps when paused: `memory` (processes resume; E2B cloud)
    or `files` (a filesystem-only pause, like `burrow sandbox-host`)."""
    e2b_workspace: str = ""
    """The workspace inside an E2B sandbox; empty: where its commands start (the home)."""
    sandbox_idle_hibernate_seconds: float = 900.0
    """Idle seconds before a sandbox hibernates (processes stop, files stay); 0 = never."""
    sandbox_network: Literal["none", "egress"] = "egress"
    """A new conversation's network policy (each may choose its own). `egress`: outbound
    through slirp4netns, with the host's loopback, private ranges and own addresses
    unreachable (without slirp4netns sandboxes get none, and say so). `none`: loopback
    only."""
    sandbox_allow_domains: str = ""
    """Comma-separated host names (`*.example.com` wildcards) egress is limited to: the
    sandbox then reaches only an allowlisting HTTP(S) proxy the server runs, through
    HTTP(S)_PROXY; empty: any public address."""
    sandbox_limits: bool = True
    """Resource limits (cgroups, workspace disk image); need root or delegated cgroups."""
    sandbox_memory_mb: int = 1024
    sandbox_pids: int = 512
    sandbox_cpus: float = 1.0
    """CPU time per second a sandbox may use (a quota, e.g. 0.5 or 2)."""
    sandbox_disk_mb: int = 2048
    """Size of each workspace (an ext4 image, sparse); 0 = no disk quota."""
    sandbox_tmp_mb: int = 256
    sandbox_seccomp: bool = True
    """The seccomp filter against dangerous system calls (x86_64)."""
    sandbox_root: Literal["writable", "read-only"] = "writable"
    """`writable`: each sandbox's `/` is its own (an overlay over the host's system, which
    stays untouched): the agent installs with apt, pip and npm as root of its namespace;
    needs a server running as root. `read-only`: the host's system read-only, as before."""
    sandbox_agent_timeout: float = 15.0
    """Seconds the server waits for a sandbox's agent to answer (connect, handshake, one
    reply; a command gets its own timeout plus this) before it kills the sandbox."""
    github_api_url: str = "https://api.github.com"
    """GitHub's REST API, where pull requests are opened (GitHub Enterprise:
    `https://github.example.com/api/v3`)."""
    github_webhook_secret: str | None = Field(default=None, min_length=16)
    """The secret GitHub signs webhook deliveries with (X-Hub-Signature-256), set on the
    repository's webhook; unset: `POST /api/webhooks/github` is off (404)."""
    git_author_name: str = "Burrow"
    git_author_email: str = "burrow@localhost"
    """Author and committer of the commits `git/push` makes."""
    git_push_max_mb: float = Field(default=512.0, gt=0)
    """The largest branch (MB, as a git bundle of its history) `git/push` copies into the
    fresh sandbox it pushes from."""
    mcp_allow_urls: str = ""
    """URL prefixes (comma-separated) of MCP servers the host may reach although they are
    not on the public internet (loopback, private ranges, this host, Burrow's own ports),
    e.g. `http://127.0.0.1:9000/mcp`. Public URLs in mcp.json need no entry."""
    mcp_connect_timeout: float = 30.0
    """Seconds an MCP server gets to start and list its tools before it is left out."""
    a2a_allow_urls: str = ""
    """URL prefixes (comma-separated) of A2A peers the `delegate` tool may reach although
    they are not on the public internet (loopback, private ranges, this host, Burrow's own
    ports), e.g. `http://10.0.0.5:8000`. Public URLs need no entry."""
    a2a_timeout: float = 300.0
    """Seconds a task handed over A2A may take, both ways: an inbound `message/send` waits
    this long for its run (then stops it), `delegate` this long for the peer's answer."""
    a2a_token_secret: str = "A2A_TOKEN"
    """The user secret whose value `delegate` sends to peers as `Authorization: Bearer`."""
    trusted_proxies: str = ""
    """Reverse proxies (comma-separated addresses or networks, e.g. `127.0.0.1,10.0.0.0/8`)
    whose X-Forwarded-For/-Proto/-Host are believed; default none: from anyone else they
    are ignored."""
    max_streams_per_user: int = 1100
    """Open event streams (SSE), terminal sockets and A2A streams per user at once; 0 = no
    cap. The default admits DESIGN §7's 1,000 clients on one conversation. Whatever it says,
    one user gets at most a quarter, and all users together half, of the open-file limit
    left after 256 descriptors (the limit is raised to the hard one at start)."""
    head_timeout_seconds: float = Field(default=10.0, gt=0)
    """Seconds a connection has to send a request's headers (from connecting, or from its
    next request's first byte); a slower one gets 408 and is closed."""
    max_pending_connections_per_address: int = Field(default=64, ge=0)
    """Connections one address may hold whose request headers are still not in after a
    second (nobody is signed in on them yet); more are closed then; 0 = no cap. Trusted
    proxies (BURROW_TRUSTED_PROXIES) are exempt."""
    stream_stall_seconds: float = Field(default=30.0, gt=0)
    """Seconds an event stream's write may wait on a client that reads nothing before
    the client is dropped (it resumes from the journal with Last-Event-ID)."""
    max_runs_per_user: int = 5
    """Runs a user may have going at once (steering an active run is not a new one);
    0 = no cap."""
    max_sandboxes_per_user: int = 10
    """Live (not hibernated) sandboxes per user; at the cap the user's least recently used
    idle one is hibernated to make room; 0 = no cap."""
    max_disk_mb_per_user: int = Field(default=20480, ge=0)
    """MiB of disk all of a user's workspaces may take together (their disk images'
    allocated blocks: needs BURROW_SANDBOX_LIMITS); a sandbox does not start while they
    take more (429 disk_quota_exceeded); 0 = no cap."""
    tool_output_live_rate: int = Field(default=LIVE_BYTES_PER_SECOND, ge=1024)
    """Bytes per second of a tool call's output shown live (`tool.output`); the rest is
    elided with a marker. The model still gets the head and tail, the log file all of it."""
    tool_output_live_max: int = Field(default=LIVE_MAX_BYTES, ge=1024)
    """Bytes of live output per tool call at most, whatever its duration."""

    replica_id: str | None = Field(default=None, pattern=r"^\S{1,200}$")
    """This process's name among replicas on one PostgreSQL (no spaces); default
    `host:pid:random`. A stable name (a pod's) lets a restarted replica repair its own
    cut-off runs at once instead of after their lease lapses."""
    run_lease_seconds: float = Field(default=12.0, ge=1.0, le=600.0)
    """Seconds a replica's hold on its runs lasts without renewal (renewed every third of
    it): how long a dead replica's runs stay open before another one repairs them."""

    def preview_listen_port(self) -> int:
        return self.preview_port if self.preview_port is not None else self.port + 1

    def database(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / 'burrow.db'}"
