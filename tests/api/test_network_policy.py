"""A conversation's network policy (DESIGN §8): chosen at creation, changed between runs,
and what its sandbox can reach follows it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, running_server
from tests.sandbox.harness import run

# npm's registry: a public name, reachable from this machine (DESIGN §8's headline task).
REACH = """
import socket
try:
    socket.create_connection(("registry.npmjs.org", 443), timeout=15).close()
    print("reached")
except OSError as exc:
    print("unreachable", exc)
"""


async def create(srv: RunningServer, **body: Any) -> dict[str, Any]:
    response = await srv.client.post("/api/conversations", json={"title": "net", **body})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def reach(srv: RunningServer, cid: str) -> str:
    sandbox = await srv.services.runtime.sandboxes.commands(cid)
    return (await run(sandbox, "python3", "-c", REACH, timeout=30)).text


async def sandbox_info(srv: RunningServer, cid: str) -> dict[str, Any]:
    response = await srv.client.get(f"/api/conversations/{cid}/sandbox")
    assert response.status_code == 200, response.text
    info: dict[str, Any] = response.json()
    return info


async def test_egress_is_the_default_and_none_is_a_choice(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        default = await create(srv)
        assert default["network"] == "egress"
        closed = await create(srv, network="none")
        assert closed["network"] == "none"
        listed = {
            c["id"]: c["network"] for c in (await srv.client.get("/api/conversations")).json()
        }
        assert listed == {default["id"]: "egress", closed["id"]: "none"}

        assert "reached" in await reach(srv, default["id"])
        assert "unreachable" in await reach(srv, closed["id"])
        info = await sandbox_info(srv, default["id"])
        assert info["network"] == "egress" and info["allow_domains"] == []
        assert (await sandbox_info(srv, closed["id"]))["network"] == "none"


async def test_patch_network_between_runs_takes_effect_at_once(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        cid = (await create(srv, network="none"))["id"]
        assert "unreachable" in await reach(srv, cid)
        patched = await srv.client.patch(f"/api/conversations/{cid}", json={"network": "egress"})
        assert patched.status_code == 200, patched.text
        assert patched.json()["network"] == "egress"
        # The idle sandbox was hibernated; it wakes with the new policy.
        assert (await sandbox_info(srv, cid))["status"] == "hibernated"
        assert "reached" in await reach(srv, cid)
        back = await srv.client.patch(f"/api/conversations/{cid}", json={"network": "none"})
        assert back.json()["network"] == "none"
        assert "unreachable" in await reach(srv, cid)
        # A setting the server does not know is refused, precisely.
        bad = await srv.client.patch(f"/api/conversations/{cid}", json={"network": "host"})
        assert bad.status_code == 422 and bad.json()["error"]["code"]


async def test_network_cannot_change_during_a_run(tmp_path: Path) -> None:
    slow = ScriptedTurn(tool_calls=[("bash", {"command": "sleep 5"})])
    provider = ScriptedProvider([slow])
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = (await create(srv, network="none", approval_mode="auto"))["id"]
        run_id = (await srv.send(cid, "wait"))["run_id"]
        await srv.wait_for(cid, lambda e: e["type"] == "tool.started", 20)
        during = await srv.client.patch(f"/api/conversations/{cid}", json={"network": "egress"})
        assert during.status_code == 409, during.text
        assert during.json()["error"]["code"] == "run_active"
        assert (await srv.client.get(f"/api/conversations/{cid}")).json()["network"] == "none"
        await srv.client.post(f"/api/conversations/{cid}/interrupt")
        await srv.run_finished(cid, run_id)


async def test_another_users_conversation_is_not_found(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        accounts = srv.services.accounts
        other = await accounts.get_or_create("mallory", is_admin=False)
        theirs = await srv.services.conversations.create(other.id, "theirs", network="none")
        patched = await srv.client.patch(
            f"/api/conversations/{theirs.id}", json={"network": "egress"}
        )
        assert patched.status_code == 404
        assert await srv.services.conversations.network_of(theirs.id) == "none"


async def test_without_slirp4netns_the_sandbox_says_egress_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # slirp4netns (and everything else) is missing
    # No limits: the disk quota's mkfs would be missing too.
    async with running_server(
        tmp_path / "data", lambda: ScriptedProvider([]), sandbox_limits=False
    ) as srv:
        cid = (await create(srv))["id"]
        assert "unreachable" in await reach(srv, cid)
        info = await sandbox_info(srv, cid)
        assert info["network"] == "egress" and info["status"] == "ready"
        assert "egress is unavailable: slirp4netns is not installed" in info["network_detail"]
        ready = [e for e in await srv.events(cid) if e["type"] == "sandbox.status"][-1]
        assert "slirp4netns is not installed" in ready["data"]["detail"], ready
    assert os.environ["PATH"] == str(empty)


async def test_allowlist_shows_in_the_status_and_fences_the_sandbox(tmp_path: Path) -> None:
    async with running_server(
        tmp_path,
        lambda: ScriptedProvider([]),
        sandbox_allow_domains="registry.npmjs.org, *.npmjs.com",
    ) as srv:
        cid = (await create(srv))["id"]
        info = await sandbox_info(srv, cid)
        assert info["allow_domains"] == ["registry.npmjs.org", "*.npmjs.com"]
        assert "allowlisting proxy" in info["network_detail"]
        # Direct: no route. Through the proxy (curl reads HTTPS_PROXY): the listed name works.
        assert "unreachable" in await reach(srv, cid)
        sandbox = await srv.services.runtime.sandboxes.commands(cid)
        url = "https://registry.npmjs.org/react"
        curl = await run(
            sandbox, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", url, timeout=60
        )
        assert curl.text == "200", curl.stderr.decode()
