"""`burrow sandbox-host`: serve Burrow's local sandboxes to the stock `e2b` SDK."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from pathlib import Path

from burrow.backends import local_backend
from burrow.config import Settings
from burrow.store.datadir import ensure_private_dir
from burrow.telemetry import logs

DEFAULT_PORT = 8430
SHUTDOWN_GRACE_SECONDS = 2
KEEP_ALIVE_SECONDS = 75  # idle connections kept as load balancers keep them (60 s and more)
LEDGER_NAME = "sandbox-host.json"  # in the data directory: the sandboxes, across restarts
NAME_VARIABLE = "BURROW_SANDBOX_HOST_NAME"
HOST_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sandbox-host",
        help="serve this machine's sandboxes through the E2B sandbox API",
        description="Serve the E2B control API and the in-sandbox envd API on one port, on "
        "top of Burrow's local (bubblewrap) sandboxes, so the stock e2b SDK (and Burrow's "
        "e2b backend) can use them. See docs/sandbox-host.md.",
        epilog="API keys: BURROW_SANDBOX_HOST_API_KEYS (comma-separated); without it one key "
        "is generated and printed. Sandbox limits and network follow BURROW_SANDBOX_*.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument("--data-dir", type=Path, help="workspaces live here (BURROW_DATA_DIR)")
    p.add_argument(
        "--name",
        default=os.environ.get(NAME_VARIABLE) or None,
        help=f"this host's name in a fleet ({NAME_VARIABLE}): it starts every sandbox id "
        "(`<name>-i…`), which is how a gateway finds a sandbox's host (docs/scale-out.md)",
    )
    p.add_argument(
        "--domain",
        help="route Host `{port}-{sandbox_id}.{domain}` to sandboxes, and tell the SDK this "
        "domain (for E2B_DOMAIN setups); without it, use E2B_SANDBOX_URL",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    try:
        from burrow.sandbox_host.app import HostConfig, SandboxHostApp
        from burrow.sandbox_host.paths import E2B_HOME
    except ImportError as exc:
        print(
            f"burrow sandbox-host needs the e2b extra ({exc.name} is missing): "
            "pip install 'burrow[e2b]'",
            file=sys.stderr,
        )
        return 2
    from burrow.sandbox_host.keys import KEYS_VARIABLE, ApiKeys
    from burrow.sandbox_host.registry import HostLimits

    if args.name is not None and not HOST_NAME.fullmatch(args.name):
        print(
            f"burrow: --name / {NAME_VARIABLE} {args.name!r}: lowercase letters, digits and "
            "inner '-', at most 40 (it starts sandbox ids, which are host names)",
            file=sys.stderr,
        )
        return 2
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    logs.configure(settings.log_format, settings.log_level)
    ensure_private_dir(settings.data_dir)
    keys, generated = ApiKeys.from_environment()
    config = HostConfig(
        limits=HostLimits(
            max_sandboxes_per_key=_int_env("BURROW_SANDBOX_HOST_MAX_SANDBOXES", 20),
            max_paused_per_key=_int_env("BURROW_SANDBOX_HOST_MAX_PAUSED", 100),
            max_timeout=_int_env("BURROW_SANDBOX_HOST_MAX_TIMEOUT", 24 * 3600),
            cpu_count=max(1, round(settings.sandbox_cpus)),
            memory_mb=settings.sandbox_memory_mb if settings.sandbox_limits else 0,
            disk_mb=settings.sandbox_disk_mb if settings.sandbox_limits else 0,
        ),
        domain=args.domain,
        max_upload_bytes=_int_env("BURROW_SANDBOX_HOST_MAX_UPLOAD_MB", 64) * 1024 * 1024,
        ledger_path=settings.data_dir / LEDGER_NAME,
        name=args.name,
        templates_dir=settings.data_dir / "templates",
    )
    app = SandboxHostApp(local_backend(settings, home=E2B_HOME), keys, config)
    url = f"http://{args.host}:{args.port}"
    print(f"Burrow sandbox host on {url}  (data: {settings.data_dir})", flush=True)
    if generated:
        print(f"API key (set {KEYS_VARIABLE} to choose your own): {generated}", flush=True)
    print(f"SDK: E2B_API_URL={url} E2B_SANDBOX_URL={url} E2B_API_KEY=<key>", flush=True)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            proxy_headers=False,
            # Command and watch streams end only when the host does: waiting for them to
            # finish first would make a stop wait forever.
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
            # Longer than a client's pause between calls (SDKs pool connections): an idle
            # connection closed as the client reuses it fails that request.
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
        )
    )
    asyncio.run(server.serve())
    return 0


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        print(f"burrow: {name} must be an integer, not {raw!r}", file=sys.stderr)
        raise SystemExit(2) from None
