"""`burrow serve` in the default configuration (SQLite, local sandboxes, the demo model, no
mcp.json, no A2A peer, no OTLP endpoint, no e2b) imports only what that configuration uses,
and `--timings` shows its start's phases. The server runs for real, in a child process
that writes down its `sys.modules` once it answers /api/health."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from burrow.ports import free_port

# Each is a tenth of a second of start or megabytes of memory, for a feature not in use.
NOT_AT_START = (
    "alembic",  # the schema is at head: one query says so
    "opentelemetry.sdk",  # no span goes anywhere
    "mcp",
    "e2b",
    "httpx",
    "httpx2",  # no HTTP MCP server, no A2A delegation, no pull request yet
    "openai",
    "anthropic",  # the demo model
    "asyncpg",
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.orm",
    "sqlalchemy.dialects.postgresql",  # SQLite
    "cryptography",  # no secret sealed or opened
    "rich",
)

SERVE_AND_LIST_MODULES = """
import json, signal, os, sys, threading, time, urllib.request
from burrow import cli

base, out, argv = sys.argv[1], sys.argv[2], sys.argv[3:]

def watch():
    while True:
        try:
            urllib.request.urlopen(base + "/api/health", timeout=1)
            break
        except OSError:
            time.sleep(0.02)
    time.sleep(0.5)  # the work done after listening, too
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=watch, daemon=True).start()
sys.exit(cli.main(argv))
"""


def serve_once(data_dir: Path, tmp: Path) -> tuple[set[str], str]:
    """Start `burrow serve --timings` on `data_dir` until healthy: the modules it had
    loaded, and what it printed on stderr."""
    port = free_port()
    out = tmp / "modules.json"
    argv = ["serve", "--timings", "--port", str(port), "--preview-port", str(free_port())]
    argv += ["--data-dir", str(data_dir), "--model", "demo"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BURROW_", "OTEL_", "E2B_"))}
    env["BURROW_ADMIN_PASSWORD"] = "a-password-for-this-test"
    script = [sys.executable, "-c", SERVE_AND_LIST_MODULES, f"http://127.0.0.1:{port}", str(out)]
    done = subprocess.run(
        [*script, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(out.read_text())), done.stderr


def loaded(modules: set[str], package: str) -> bool:
    return any(m == package or m.startswith(package + ".") for m in modules)


def test_a_restart_imports_only_what_the_configuration_uses(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first, _ = serve_once(data_dir, tmp_path)  # a new data directory: migrated
    assert loaded(first, "alembic")  # which this test would see
    again, printed = serve_once(data_dir, tmp_path)
    assert [p for p in NOT_AT_START if loaded(again, p)] == []
    for phase in ("server imports", "database: open, schema at head", "services", "listeners up"):
        assert phase in printed, printed
    assert "database: open, migrated" not in printed
