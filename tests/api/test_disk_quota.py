"""One user's workspaces cannot take the host's disk: past BURROW_MAX_DISK_MB_PER_USER of
disk images in all of their conversations, no sandbox of theirs starts (429
disk_quota_exceeded, naming the setting and what to do), while another user's does; once
space is freed, it starts again."""

from __future__ import annotations

from pathlib import Path

from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server
from tests.api.test_quotas import second_user
from tests.sandbox.harness import run


async def test_a_users_workspaces_are_bounded_together(tmp_path: Path) -> None:
    settings = {"sandbox_disk_mb": 96, "max_disk_mb_per_user": 40}
    async with running_server(tmp_path, lambda: ScriptedProvider([]), **settings) as srv:
        first = await srv.create_conversation()
        sandbox = await srv.services.runtime.sandboxes.get(first)
        fill = await run(sandbox, "sh", "-c", "head -c 41M /dev/zero > fill && sync")
        assert fill.exit.exit_code == 0, fill.stderr
        await srv.services.runtime.sandboxes.hibernate(first)
        second = await srv.create_conversation()
        refused = await srv.client.get(f"/api/conversations/{second}/files", params={"path": "."})
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "disk_quota_exceeded"
        assert "BURROW_MAX_DISK_MB_PER_USER" in error["message"] and "delete" in error["message"]
        async with second_user(srv) as bob:  # another account is not held up
            made = await bob.post("/api/conversations", json={})
            listed = await bob.get(f"/api/conversations/{made.json()['id']}/files?path=.")
            assert listed.status_code == 200, listed.text
        assert (await srv.client.delete(f"/api/conversations/{first}")).status_code == 204
        again = await srv.client.get(f"/api/conversations/{second}/files", params={"path": "."})
        assert again.status_code == 200, again.text
