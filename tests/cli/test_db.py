"""`burrow db` and the schema step of `burrow serve`: refusals are one message that says
what to do, with exit status 2, before anything listens."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from burrow.store.migrate import head_revision
from tests.api.harness import free_port, serve_process
from tests.store.main_fixture import make_sqlite


def burrow(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "burrow.cli", *args]
    environment = {**os.environ, "BURROW_ADMIN_PASSWORD": "cli-test-password", **env}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment)


def serve(data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    ports = ["--port", str(free_port()), "--preview-port", str(free_port())]
    return burrow("serve", "--data-dir", str(data_dir), "--model", "demo", *ports, **env)


def test_serve_refuses_a_database_from_a_newer_burrow(tmp_path: Path) -> None:
    assert burrow("db", "upgrade", "--data-dir", str(tmp_path)).returncode == 0
    with sqlite3.connect(tmp_path / "burrow.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0042'")
    done = serve(tmp_path)  # on main it serves (and this times out)
    assert done.returncode == 2, done.stderr
    assert "burrow: The database is at schema revision '0042'" in done.stderr
    assert "Run that newer version" in done.stderr
    assert "Traceback" not in done.stderr
    current = burrow("db", "current", "--data-dir", str(tmp_path))
    assert "newer than this Burrow" in current.stdout


def test_without_auto_migrate_serve_names_the_command_which_then_upgrades(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_sqlite(tmp_path / "burrow.db")
    refused = serve(tmp_path, BURROW_AUTO_MIGRATE="false")
    assert refused.returncode == 2, refused.stderr
    assert "made before migrations" in refused.stderr
    assert "run `burrow db upgrade` with the same BURROW_DATABASE_URL or --data-dir" in (
        refused.stderr
    )
    behind = burrow("db", "current", "--data-dir", str(tmp_path))
    assert "made before migrations" in behind.stdout and "burrow db upgrade" in behind.stdout
    upgraded = burrow("db", "upgrade", "--data-dir", str(tmp_path))
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"at revision {head_revision()}" in upgraded.stdout and "up to date" in upgraded.stdout
    monkeypatch.setenv("BURROW_AUTO_MIGRATE", "false")
    with serve_process(tmp_path, "demo"):
        pass  # healthy: at head, nothing to refuse
