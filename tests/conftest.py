"""Shared fixtures: real databases (a SQLite file and a PostgreSQL database per test)."""

from __future__ import annotations

import contextlib
import gc
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, NoReturn

import asyncpg
import pytest

from burrow.store.database import Database
from burrow.store.migrate import open_database

PG_ADMIN_DSN = os.environ.get("BURROW_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI") == "true"


def unavailable(what: str) -> NoReturn:
    """Skip locally when a service is missing; in CI that is a failure, never a skip."""
    if IN_CI:
        pytest.fail(f"{what} is required in CI")
    pytest.skip(f"{what} is not available")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """In CI a skip from anywhere (a marker, a plugin, a bare pytest.skip) is a failure."""
    report = yield
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI=true), which counts as a failure: {report.longrepr}"
    return report


@pytest.fixture(autouse=True)
def hermetic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests configure Burrow explicitly; the developer's model settings never leak in."""
    for name in list(os.environ):
        if name.startswith(("BURROW_", "OPENAI_", "ANTHROPIC_")) and name != "BURROW_TEST_PG":
            monkeypatch.delenv(name)


@contextlib.asynccontextmanager
async def pg_database() -> AsyncIterator[str]:
    """A new, empty PostgreSQL database for one test, dropped afterwards."""
    name = f"burrow_test_{secrets.token_hex(4)}"
    try:
        admin = await asyncpg.connect(PG_ADMIN_DSN, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        unavailable(f"PostgreSQL at {PG_ADMIN_DSN} ({exc})")
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        base = PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
        yield f"{base}/{name}"
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with pg_database() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'burrow.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """The same test against a real SQLite file and a real PostgreSQL database."""
    async with contextlib.AsyncExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite+aiosqlite:///{tmp_path / 'burrow.db'}"
        else:
            url = await stack.enter_async_context(pg_database())
        eng = await open_database(url)
        yield eng
        await eng.close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Reap what killed servers of this run left: tests end `burrow serve` with SIGKILL, so
    their sandboxes' processes, workspace mounts, loop devices and cgroups outlive them
    (a restarted server would reap its own; these data directories see no restart)."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or os.geteuid() != 0 or _xdist_controller(session.config):
        return  # with workers (pytest -n), each reaps its own; the controller ran nothing
    from burrow.sandbox.leftovers import Leftovers

    for workspaces in _workspace_dirs(factory.getbasetemp(), depth=5):
        leftovers = Leftovers(workspaces)
        for sandbox_id in leftovers.sandbox_ids():
            with contextlib.suppress(OSError):
                leftovers.reap(sandbox_id)


def _xdist_controller(config: pytest.Config) -> bool:
    """pytest-xdist's controlling process: its base temp holds the workers' ones, and
    asking it for that directory would delete their trees (it never made one of its own)."""
    return config.pluginmanager.has_plugin("dsession")


def _workspace_dirs(root: Path, depth: int) -> list[Path]:
    """Data directories' `workspaces` folders under `root`, never descending into one."""
    found: list[Path] = []
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.name == "workspaces":
                found.append(Path(entry.path))
            elif depth > 1:
                found += _workspace_dirs(Path(entry.path), depth - 1)
    return found


@pytest.fixture(autouse=True)
def collect_garbage_after_each_test() -> Iterator[None]:
    """What a test leaked (a subprocess transport whose loop it closed, an unclosed
    socket) warns in that test's teardown, not in whichever later test the collector ran
    in: twice CI failed an innocent test that way, once mid-compile (CPython 3.11's
    gh-106905). Costs about 20 ms a test."""
    yield
    gc.collect()
