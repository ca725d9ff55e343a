"""A conversation's sandbox over time: hibernate when idle, wake on use, restart, fail loudly."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from burrow.llm.scripted import ScriptedProvider
from burrow.sandbox.backend import ExecRequest
from burrow.sandbox.local import LocalBackend
from tests.api.harness import RunningServer, running_server
from tests.sandbox.harness import run

IDLE = 1.0

SERVICE = {
    "port": 8000,
    "command": "python3 -m http.server 8000 --bind 127.0.0.1",
    "cwd": "/workspace/site",
}
FETCH = """
import sys, time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8000/index.html", timeout=1).read().decode())
        break
    except OSError:
        time.sleep(0.05)
"""


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[RunningServer]:
    async with running_server(
        tmp_path, lambda: ScriptedProvider([]), sandbox_idle_hibernate_seconds=IDLE
    ) as server:
        yield server


async def statuses(srv: RunningServer, cid: str) -> list[dict[str, Any]]:
    return [e["data"] for e in await srv.events(cid) if e["type"] == "sandbox.status"]


async def sandbox_state(srv: RunningServer, cid: str) -> dict[str, Any]:
    response = await srv.client.get(f"/api/conversations/{cid}/sandbox")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def wait_for_status(srv: RunningServer, cid: str, status: str, within: float = 10) -> None:
    """Follows the event stream until the first `sandbox.status` event with `status`."""
    await srv.wait_for(
        cid, lambda e: e["type"] == "sandbox.status" and e["data"]["status"] == status, within
    )


async def test_hibernate_then_wake_keeps_files_and_restarts_services(srv: RunningServer) -> None:
    cid = await srv.create_conversation()
    pool = srv.services.runtime.sandboxes
    sandbox = await pool.get(cid)
    await sandbox.write_file("site/index.html", b"hello from before")
    await sandbox.write_file(".burrow/services.json", json.dumps([SERVICE]).encode())
    await wait_for_status(srv, cid, "hibernated", within=IDLE + 5)
    assert sandbox.status != "ready"  # every process stopped

    # A file read wakes it: the files are intact and the recorded service answers again.
    content = await srv.client.get(
        f"/api/conversations/{cid}/files/content", params={"path": "site/index.html"}
    )
    assert content.status_code == 200 and content.text == "hello from before"
    awake = pool.running(cid)
    assert awake is not None
    assert "hello from before" in (await run(awake, "python3", "-c", FETCH)).text
    seen = await statuses(srv, cid)
    assert [s["status"] for s in seen] == ["starting", "ready", "hibernated", "starting", "ready"]
    assert "Waking" in seen[3]["detail"] and "8000" in seen[4]["detail"]
    capabilities = (await sandbox_state(srv, cid))["capabilities"]
    assert capabilities["hibernation"] == "files" and capabilities["preview"] == "tunnel"


async def test_a_running_command_keeps_the_sandbox_awake(srv: RunningServer) -> None:
    cid = await srv.create_conversation()
    sandbox = await srv.services.runtime.sandboxes.get(cid)
    long_command = sandbox.exec(ExecRequest(argv=["sleep", str(IDLE * 2.5)]))
    async for _ in long_command:
        pass  # the sandbox stays ready although nothing touched it for longer than IDLE
    assert (await sandbox_state(srv, cid))["status"] == "ready"
    await wait_for_status(srv, cid, "hibernated", within=IDLE * 3 + 5)


async def test_a_terminal_request_wakes_a_hibernated_sandbox(srv: RunningServer) -> None:
    cid = await srv.create_conversation()
    await srv.services.runtime.sandboxes.get(cid)
    await wait_for_status(srv, cid, "hibernated", within=IDLE + 5)
    opened = await srv.client.post(
        f"/api/conversations/{cid}/terminals", json={"cols": 80, "rows": 24}
    )
    assert opened.status_code == 201, opened.text
    assert (await sandbox_state(srv, cid))["status"] == "ready"


async def test_a_failed_boot_stays_failed_with_its_reason_until_restart(
    srv: RunningServer,
) -> None:
    cid = await srv.create_conversation()
    backend = srv.services.runtime.sandboxes.backend
    assert isinstance(backend, LocalBackend)
    working_python, backend.python = backend.python, "/nonexistent/python3"
    listing = f"/api/conversations/{cid}/files"
    first = await srv.client.get(listing)
    assert first.status_code == 503 and first.json()["error"]["code"] == "boot_failed"
    state = await sandbox_state(srv, cid)
    assert state["status"] == "failed" and "/nonexistent/python3" in state["detail"]
    second = await srv.client.get(listing)  # no silent retry, no fallback to the host
    assert second.status_code == 503 and "Restart it" in second.json()["error"]["message"]
    assert [s["status"] for s in await statuses(srv, cid)] == ["starting", "failed"]

    backend.python = working_python
    restarted = await srv.client.post(f"/api/conversations/{cid}/sandbox/restart", json={})
    assert restarted.status_code == 202 and restarted.json()["status"] == "ready"
    assert (await srv.client.get(listing)).status_code == 200


async def test_restart_stops_processes_and_keeps_files(srv: RunningServer) -> None:
    cid = await srv.create_conversation()
    sandbox = await srv.services.runtime.sandboxes.get(cid)
    await sandbox.write_file("kept.txt", b"kept")
    await run(sandbox, "sh", "-c", "sleep 1000 > /dev/null 2>&1 &")
    restarted = await srv.client.post(f"/api/conversations/{cid}/sandbox/restart", json={})
    assert restarted.status_code == 202, restarted.text
    fresh = srv.services.runtime.sandboxes.running(cid)
    assert fresh is not None
    assert (await run(fresh, "pgrep", "-x", "sleep")).exit.exit_code == 1
    assert await fresh.read_file("kept.txt") == b"kept"


async def test_what_a_sandbox_installs_outlives_hibernation_and_goes_with_its_conversation(
    srv: RunningServer,
) -> None:
    cid = await srv.create_conversation()
    pool = srv.services.runtime.sandboxes
    sandbox = await pool.get(cid)
    made = await run(sandbox, "sh", "-c", "printf '#!/bin/sh\\necho tool\\n' > /usr/local/bin/tool")
    assert made.exit.exit_code == 0, made.stderr
    await run(sandbox, "chmod", "+x", "/usr/local/bin/tool")
    await wait_for_status(srv, cid, "hibernated", within=IDLE + 5)
    state = await sandbox_state(srv, cid)
    assert (state["environment"], state["root_writable"]) == ("host", True)
    assert [(layer["name"], layer["writable"]) for layer in state["layers"]] == [
        ("host", False),
        ("conversation", True),
    ]
    assert "checkpoints cover /workspace only" in state["root_detail"]
    awake = await pool.get(cid)
    assert (await run(awake, "tool")).text == "tool\n"
    backend = srv.services.conversations.workspace.backend
    assert isinstance(backend, LocalBackend)
    layer = backend.layer_dir(cid)
    assert layer.is_dir()
    assert (await srv.client.delete(f"/api/conversations/{cid}")).status_code == 204
    assert not layer.exists()
