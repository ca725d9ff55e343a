"""GET /api/conversations/{cid}/previews: the recorded services, their status, and a
fresh signed link for the caller."""

from __future__ import annotations

from pathlib import Path

from burrow.runs.journal.events import PreviewOpened, make
from tests.api.harness import running_server
from tests.preview.harness import Preview
from tests.sandbox.harness import run


async def test_lists_services_with_status_and_a_signed_link(tmp_path: Path) -> None:
    async with running_server(tmp_path, None, preview=True) as server:
        cid = await server.create_conversation()
        assert (await server.client.get(f"/api/conversations/{cid}/previews")).json() == []
        preview = Preview(server, cid, server.client)
        await preview.start(8020, "app_server.py")

        [listed] = (await server.client.get(f"/api/conversations/{cid}/previews")).json()
        assert listed["port"] == 8020
        assert listed["status"] == "running"
        assert listed["command"] == "python3 app_server.py 8020"
        assert listed["url"].startswith(f"http://{preview.host(8020)}/?burrow_token=")

        sandbox = await preview.sandbox()
        await run(sandbox, "bash", "-c", "kill -- -$(cat .burrow/services/8020.pid)")
        [stopped] = (await server.client.get(f"/api/conversations/{cid}/previews")).json()
        assert stopped["status"] == "stopped"

        # A sleeping sandbox is not woken to be listed: the journal names its previews.
        await server.services.journal.append(
            cid, make(PreviewOpened(port=8020, url=preview.host(8020)))
        )
        await sandbox.stop()
        [sleeping] = (await server.client.get(f"/api/conversations/{cid}/previews")).json()
        assert sleeping["status"] == "hibernated"
        assert server.services.runtime.sandboxes.running(cid) is None


async def test_an_unknown_conversation_is_not_found(tmp_path: Path) -> None:
    async with running_server(tmp_path, None) as server:
        response = await server.client.get("/api/conversations/c_0000000000000000/previews")
        assert response.status_code == 404
