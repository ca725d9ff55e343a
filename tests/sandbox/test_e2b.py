"""What the e2b backend adds to the conformance suite, against a real `burrow sandbox-host`:
finding a conversation's remote sandbox again by its stored id or its metadata (a restarted
server, another replica), pause and resume, and previews through Burrow's own proxy over HTTP."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import httpx
import pytest
from e2b import AsyncSandbox

from burrow.runs.journal.journal import Journal
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.sandbox.backend import ErrorCode, SandboxError
from burrow.sandbox.e2b import E2BBackend
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.events import EventStore
from burrow.store.migrate import open_database
from burrow.store.remote_sandboxes import RemoteSandboxStore
from tests.api.harness import running_server
from tests.preview.harness import Preview
from tests.runs.workspace.test_sandbox_capabilities import WAIT_FOR_PORT
from tests.sandbox.harness import run
from tests.sandbox.remote import SandboxHost

SERVICE = "echo start >> starts.log && exec python3 -m http.server 8000 --bind 127.0.0.1"


def backend_on(host: SandboxHost) -> E2BBackend:
    return E2BBackend(api=host.api, hibernation="files", network="none")


def new_id() -> str:
    return f"conv-{secrets.token_hex(4)}"


async def test_a_restarted_server_finds_the_sandbox_by_its_metadata(
    sandbox_host: SandboxHost,
) -> None:
    sandbox_id = new_id()
    first = backend_on(sandbox_host)
    sandbox = await first.create(sandbox_id)
    await sandbox.write_file("note.txt", b"kept")
    # Another replica, or this server after a restart: no memory of the remote id.
    second = backend_on(sandbox_host)
    found = await second.create(sandbox_id)
    assert found.remote_id == sandbox.remote_id
    assert await found.read_file("note.txt") == b"kept"
    other = await second.create(new_id())  # another conversation: another remote sandbox
    assert other.remote_id != sandbox.remote_id
    with pytest.raises(SandboxError) as caught:
        await other.read_file("note.txt")
    assert caught.value.code == ErrorCode.NOT_FOUND
    await second.destroy(other.id)
    await second.destroy(sandbox_id)
    fresh = await backend_on(sandbox_host).create(sandbox_id)  # destroyed: a new one
    assert fresh.remote_id != sandbox.remote_id
    with pytest.raises(SandboxError):
        await fresh.read_file("note.txt")
    await first.destroy(sandbox_id)


async def test_the_remote_id_is_kept_in_the_database_and_found_on_any_host(
    sandbox_host: SandboxHost, tmp_path: Path
) -> None:
    """The fleet case: the row finds a sandbox no metadata listing would (its host is not
    the one asked, or the sandbox predates the metadata); a remote sandbox killed behind
    Burrow's back is replaced by a fresh one and the row follows; destroy forgets it."""
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'ids.db'}")
    ids = RemoteSandboxStore(db)
    sandbox_id = new_id()
    # Made by hand, without Burrow's metadata: only the database row leads to it.
    unlabelled = await AsyncSandbox.create(timeout=300, **sandbox_host.api)
    try:
        await unlabelled.files.write("note.txt", "made by hand")
        await ids.put(sandbox_id, unlabelled.sandbox_id)
        backend = E2BBackend(api=sandbox_host.api, hibernation="files", remote_ids=ids)
        sandbox = await backend.create(sandbox_id)
        assert sandbox.remote_id == unlabelled.sandbox_id
        assert await sandbox.read_file("note.txt") == b"made by hand"
        # Killed behind Burrow's back; a restarted server (no memory) gets a fresh one.
        await AsyncSandbox.kill(unlabelled.sandbox_id, **sandbox_host.api)
        after = E2BBackend(api=sandbox_host.api, hibernation="files", remote_ids=ids)
        fresh = await after.create(sandbox_id)
        assert fresh.remote_id != unlabelled.sandbox_id
        assert await ids.get(sandbox_id) == fresh.remote_id
        await after.destroy(sandbox_id)
        assert await ids.get(sandbox_id) is None
        assert await AsyncSandbox.kill(fresh.remote_id, **sandbox_host.api) is False  # gone
    finally:
        await AsyncSandbox.kill(unlabelled.sandbox_id, **sandbox_host.api)
        await db.close()


async def test_hibernation_pauses_and_the_next_create_resumes_it(
    sandbox_host: SandboxHost,
) -> None:
    backend, sandbox_id = backend_on(sandbox_host), new_id()
    try:
        sandbox = await backend.create(sandbox_id)
        await sandbox.write_file("kept.txt", b"still here")
        await backend.hibernate(sandbox)
        assert sandbox.status == "hibernated"
        with pytest.raises(SandboxError) as caught:
            await sandbox.read_file("kept.txt")
        assert caught.value.code == ErrorCode.UNAVAILABLE
        woken = await backend.create(sandbox_id)
        assert woken.remote_id == sandbox.remote_id and woken.status == "ready"
        assert await woken.read_file("kept.txt") == b"still here"
        assert (await run(woken, "cat", "kept.txt")).stdout == b"still here"
    finally:
        await backend.destroy(sandbox_id)


async def test_a_byte_tunnel_is_not_supported_and_says_what_to_use(
    sandbox_host: SandboxHost,
) -> None:
    backend, sandbox_id = backend_on(sandbox_host), new_id()
    try:
        sandbox = await backend.create(sandbox_id)
        with pytest.raises(SandboxError) as caught:
            await sandbox.open_tunnel(8000)
        assert caught.value.code == ErrorCode.NOT_SUPPORTED
        assert "e2b backend does not support byte tunnels" in caught.value.message
    finally:
        await backend.destroy(sandbox_id)


async def test_a_preview_reaches_the_remote_port_through_burrows_proxy(
    sandbox_host: SandboxHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner's signed link, then the cookie, through Burrow's preview listener to a
    service in the remote sandbox; a stranger without them is refused before any hop."""
    monkeypatch.setenv("E2B_API_KEY", sandbox_host.api_key)
    monkeypatch.setenv("E2B_API_URL", sandbox_host.url)
    monkeypatch.setenv("E2B_SANDBOX_URL", sandbox_host.url)
    settings = {"sandbox": "e2b", "e2b_hibernation": "files", "sandbox_network": "none"}
    async with running_server(tmp_path / "data", None, preview=True, **settings) as server:
        cid = await server.create_conversation()
        base = f"http://127.0.0.1:{server.preview_port}"
        async with httpx.AsyncClient(base_url=base, timeout=30) as proxy:
            preview = Preview(server, cid, proxy)
            try:
                sandbox = await preview.sandbox()
                await sandbox.write_file("site/index.html", b"<h1>remote</h1>")
                await preview.start(8000, command="cd site && python3 -m http.server 8000")
                assert (await preview.get(8000, "/index.html", None)).status_code == 401
                cookie = await preview.sign_in(8000)
                page = await preview.get(8000, "/index.html", cookie)
                assert page.status_code == 200 and page.text == "<h1>remote</h1>"
                spoofed = {"e2b-sandbox-port": "49983", "e2b-sandbox-id": "someone-else"}
                again = await preview.get(8000, "/index.html", cookie, spoofed)
                assert again.status_code == 200 and again.text == "<h1>remote</h1>"
            finally:
                await server.services.runtime.sandboxes.destroy(cid)


async def test_a_flood_of_commands_keeps_each_output_apart_and_the_excess_is_refused(
    sandbox_host: SandboxHost,
) -> None:
    """40 commands at once each get their own output; past the host's cap (64 live
    processes) a start is refused with a typed error, and the sandbox answers after."""
    backend, sandbox_id = backend_on(sandbox_host), new_id()
    try:
        sandbox = await backend.create(sandbox_id)
        results = await asyncio.gather(
            *(run(sandbox, "sh", "-c", f"sleep 0.2; echo out-{n}") for n in range(40))
        )
        assert [r.text for r in results] == [f"out-{n}\n" for n in range(40)]
        flood = [run(sandbox, "sleep", "5", timeout=10) for _ in range(80)]
        outcomes = await asyncio.gather(*flood, return_exceptions=True)
        refused = [o for o in outcomes if isinstance(o, SandboxError)]
        assert refused and all(o.code == ErrorCode.TOO_LARGE for o in refused), outcomes[:3]
        assert len(refused) <= 80 - 60
        assert (await run(sandbox, "echo", "still here")).text == "still here\n"
    finally:
        await backend.destroy(sandbox_id)


async def test_the_pool_hibernates_wakes_and_restarts_an_e2b_sandbox(
    sandbox_host: SandboxHost, tmp_path: Path
) -> None:
    """Through the runs layer: hibernation pauses (files only on a sandbox host), the next
    use resumes it and starts the recorded service once; a restart keeps the files."""
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    user = await AccountStore(db).get_or_create("alice")
    cid = (await ConversationStore(db).create(user.id, "t")).id
    pool = SandboxPool(backend_on(sandbox_host), Journal(EventStore(db)), idle_seconds=None)
    service = {"port": 8000, "command": SERVICE, "cwd": ""}
    try:
        sandbox = await pool.get(cid)
        service["cwd"] = sandbox.workspace
        await sandbox.write_file(".burrow/services.json", json.dumps([service]).encode())
        assert await pool.hibernate(cid)
        assert pool.state(cid).status == "hibernated"
        awake = await pool.get(cid)
        assert "services started again on port(s) 8000" in pool.state(cid).detail
        assert (await run(awake, "bash", "-c", WAIT_FOR_PORT)).exit.exit_code == 0
        assert (await awake.read_file("starts.log")).count(b"start") == 1
        restarted = await pool.restart(cid)
        assert "services started again on port(s) 8000" in pool.state(cid).detail
        assert (await run(restarted, "bash", "-c", WAIT_FOR_PORT)).exit.exit_code == 0
        assert (await restarted.read_file("starts.log")).count(b"start") == 2  # files kept
    finally:
        await pool.destroy(cid)
        await pool.close()
        await db.close()
