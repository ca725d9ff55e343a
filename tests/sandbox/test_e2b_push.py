"""`git/push` on the e2b backend, against a real `burrow sandbox-host`: the credentialed push
runs in a fresh remote sandbox of its own, which is killed afterwards."""

from __future__ import annotations

import asyncio
import secrets

import pytest
from e2b import AsyncSandbox, SandboxQuery, SandboxState

from burrow.runs.workspace.git.push import Author, GitFailed, commit_and_push
from burrow.sandbox.e2b import E2BBackend
from burrow.sandbox.e2b.backend import METADATA_KEY
from tests.sandbox.harness import run
from tests.sandbox.remote import SandboxHost

# A listener on the conversation's sandbox's own loopback, where its remote points.
LISTENER = (
    "import socket, sys\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 8099)); s.listen(8)\n"
    "open('listening', 'w').close()\n"
    "while True:\n"
    "    c, _ = s.accept(); open('heard.log', 'ab').write(c.recv(65536)); c.close()\n"
)
REPO = (
    "git init -q -b main && echo hi > a.txt && git remote add origin http://127.0.0.1:8099/r.git"
    ' && (nohup python3 -c "$1" >/dev/null 2>&1 &)'
    " && for i in $(seq 100); do [ -e listening ] && break; sleep 0.05; done && ls listening"
)


async def test_an_e2b_push_runs_in_a_fresh_remote_sandbox_killed_after(
    sandbox_host: SandboxHost,
) -> None:
    backend = E2BBackend(api=sandbox_host.api, hibernation="files", network="none")
    sandbox = await backend.create(f"conv-{secrets.token_hex(4)}")
    try:
        made = await run(sandbox, "sh", "-c", REPO, "sh", LISTENER)
        assert made.exit.exit_code == 0, made.stderr
        with pytest.raises(GitFailed) as caught:
            await commit_and_push(
                sandbox,
                maker=backend,
                network="none",
                branch="burrow/e2b",
                remote_name="origin",
                message="m",
                author=Author("A", "a@example.com"),
                credential="e2b-push-token",
                max_bytes=1 << 20,
            )
        # The branch crossed into the push sandbox and git pushed from there: nothing
        # listens on that sandbox's loopback, and the conversation's listener heard nothing.
        assert caught.value.code == "push_failed", caught.value.message
        assert "127.0.0.1" in caught.value.message, caught.value.message
        await asyncio.sleep(0.2)
        heard = await run(sandbox, "sh", "-c", "cat heard.log 2>/dev/null | wc -c")
        assert heard.stdout.strip() == b"0"
        assert [s for s in backend._sandboxes if ".push-" in s] == []
        query = SandboxQuery(state=[SandboxState.RUNNING, SandboxState.PAUSED])
        pages = AsyncSandbox.list(query=query, **sandbox_host.api)
        remote = [info.metadata.get(METADATA_KEY, "") for info in await pages.next_items()]
        assert sandbox.id in remote and not [r for r in remote if ".push-" in r]
    finally:
        await backend.destroy(sandbox.id)
