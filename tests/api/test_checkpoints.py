"""Workspace checkpoints through a real server and real sandboxes: each run starts with one
that holds what bash did too; diff, restore (itself undoable) and revert; other users and
hostile workspaces (a symlink out, a newline in a name, a 50 MB file) cannot hurt it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.workspace.workspace_diff import PATCH_LIMIT_PER_FILE, PATCH_LIMIT_TOTAL
from burrow.sandbox.backend import ExecChunk, ExecExit, ExecRequest
from tests.api.harness import RunningServer, log_in, running_server

CHANGES = (
    "printf 'a\\nB\\nc\\nd\\n' > keep.txt && rm gone.txt && printf '1\\n2\\n3\\n' > new.txt"
    " && head -c 300 /dev/urandom > blob.bin && printf 'z\\0' >> blob.bin && echo y >> proj/f.txt"
    " && mkdir -p .burrow/services .burrow/attachments"
    " && echo log > .burrow/services/3000.log && echo pic > .burrow/attachments/a.txt"
)


def provider() -> ScriptedProvider:
    return ScriptedProvider(
        [ScriptedTurn(tool_calls=[("bash", {"command": CHANGES})]), ScriptedTurn(text="done")],
        turn_from_context=True,
    )


async def shell(srv: RunningServer, cid: str, command: str) -> str:
    """Run `command` in the conversation's sandbox (as the user's own terminal would)."""
    sandbox = await srv.services.runtime.sandboxes.get(cid)
    out = b""
    async for item in sandbox.exec(ExecRequest(argv=["sh", "-c", command])):
        if isinstance(item, ExecChunk):
            out += item.data
        elif isinstance(item, ExecExit):
            assert item.exit_code == 0, (command, out)
    return out.decode()


async def run(srv: RunningServer, cid: str, content: str = "go") -> str:
    sent = await srv.send(cid, content)
    finished = await srv.run_finished(cid, sent["run_id"], timeout=60)
    assert finished["data"]["status"] == "completed", finished
    run_id: str = sent["run_id"]
    return run_id


def by_path(diff: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in diff["files"]}


async def test_a_run_is_checkpointed_diffed_restored_and_reverted(tmp_path: Path) -> None:
    async with running_server(tmp_path, provider) as srv:
        cid = await srv.create_conversation()
        await shell(
            srv,
            cid,
            "printf 'a\\nb\\nc\\n' > keep.txt && printf 'x\\ny\\n' > gone.txt"
            " && mkdir proj && cd proj && git init -q && echo x > f.txt"
            " && git -c user.name=u -c user.email=u@u add f.txt"
            " && git -c user.name=u -c user.email=u@u commit -qm one",
        )
        run_id = await run(srv, cid)
        base = f"/api/conversations/{cid}"

        listed = (await srv.client.get(f"{base}/checkpoints")).json()
        assert [c["run_id"] for c in listed] == [run_id]
        first = listed[0]["id"]

        response = await srv.client.get(f"{base}/diff")
        assert response.status_code == 200, response.text
        files = by_path(response.json())
        assert set(files) == {
            "keep.txt",
            "gone.txt",
            "new.txt",
            "blob.bin",
            "proj/f.txt",  # a nested repository's files are checkpointed as files
            ".burrow/attachments/a.txt",  # the user's content; services/ is Burrow's
        }
        keep = files["keep.txt"]
        assert (keep["status"], keep["additions"], keep["deletions"]) == ("modified", 2, 1)
        assert "-b\n+B\n" in keep["patch"] and keep["binary"] is False
        gone = files["gone.txt"]
        assert (gone["status"], gone["additions"], gone["deletions"]) == ("deleted", 0, 2)
        new = files["new.txt"]
        assert (new["status"], new["additions"], new["deletions"]) == ("added", 3, 0)
        assert files["blob.bin"]["binary"] is True and files["blob.bin"]["status"] == "added"
        assert files["proj/f.txt"]["additions"] == 1

        patch = await srv.client.get(f"{base}/diff", params={"from": first, "format": "patch"})
        assert patch.headers["content-type"].startswith("text/x-diff")
        assert "diff --git a/new.txt b/new.txt\nnew file mode 100644" in patch.text
        assert "+++ /dev/null" in patch.text  # gone.txt

        # Restore: the workspace as it was, and the state before is a checkpoint of its own.
        restored = await srv.client.post(f"{base}/checkpoints/{first}/restore", json={})
        assert restored.status_code == 200, restored.text
        undo = restored.json()["undo_checkpoint_id"]
        state = await shell(srv, cid, "cat keep.txt gone.txt proj/f.txt; ls")
        assert state.startswith("a\nb\nc\nx\ny\nx\n") and "new.txt" not in state
        assert "blob.bin" not in state
        assert (await srv.client.get(f"{base}/diff")).json()["files"] == []
        events = await srv.events(cid)
        [event] = [e for e in events if e["type"] == "workspace.restored"]
        assert event["data"] == {"checkpoint_id": first, "undo_checkpoint_id": undo}
        # The user's nested repository still works (its .git was never touched).
        assert await shell(srv, cid, "cd proj && git status --porcelain") == ""

        # Undo the restore: the run's changes are back.
        back = await srv.client.post(f"{base}/checkpoints/{undo}/restore", json={})
        assert back.status_code == 200, back.text
        assert await shell(srv, cid, "cat new.txt keep.txt") == "1\n2\n3\na\nB\nc\nd\n"
        assert [c["id"] for c in (await srv.client.get(f"{base}/checkpoints")).json()][:2] == [
            first,
            undo,
        ]

        # Revert one file, then one the checkpoint did not have (it goes).
        one = await srv.client.post(
            f"{base}/files/revert", json={"path": "/workspace/keep.txt", "checkpoint_id": first}
        )
        assert one.status_code == 200, one.text
        assert one.json()["status"] == "restored" and one.json()["path"] == "keep.txt"
        removed = await srv.client.post(
            f"{base}/files/revert", json={"path": "new.txt", "checkpoint_id": first}
        )
        assert removed.json()["status"] == "deleted"
        assert await shell(srv, cid, "cat keep.txt; ls") == "a\nb\nc\nblob.bin\nkeep.txt\nproj\n"
        # ... and the revert is undoable too.
        redo = removed.json()["undo_checkpoint_id"]
        await srv.client.post(f"{base}/checkpoints/{redo}/restore", json={})
        assert await shell(srv, cid, "cat new.txt") == "1\n2\n3\n"

        # Refusals say what is wrong.
        for bad in ("ck_0123", "HEAD", "ck_zz", "ck_" + "0" * 60):
            missing = await srv.client.post(f"{base}/checkpoints/{bad}/restore", json={})
            assert missing.status_code == 404, missing.text
        missing = await srv.client.get(f"{base}/diff", params={"to": "ck_00ff"})
        assert missing.json()["error"]["code"] == "checkpoint_not_found"
        for path in ("../outside", ".burrow/checkpoints/index", "proj/.git/config", "."):
            refused = await srv.client.post(
                f"{base}/files/revert", json={"path": path, "checkpoint_id": first}
            )
            assert refused.status_code == 400, (path, refused.text)
        nowhere = await srv.client.post(
            f"{base}/files/revert", json={"path": "never.txt", "checkpoint_id": first}
        )
        assert nowhere.status_code == 404

        # Another user sees none of it.
        made = await srv.client.post("/api/users", json={"username": "eve", "password": "eve-pw-1"})
        assert made.status_code == 201, made.text
        async with httpx.AsyncClient(base_url=srv.base_url) as eve:
            await log_in(eve, "eve", "eve-pw-1")
            assert (await eve.get(f"{base}/checkpoints")).status_code == 404
            assert (await eve.get(f"{base}/diff")).status_code == 404
            assert (
                await eve.post(f"{base}/checkpoints/{first}/restore", json={})
            ).status_code == 404
            answer = await eve.post(
                f"{base}/files/revert", json={"path": "keep.txt", "checkpoint_id": first}
            )
            assert answer.status_code == 404


HOSTILE = (
    "ln -s /etc/passwd out && ln -s / root && printf 'n\\n' > \"$(printf 'new\\nline')\""
    " && head -c 52428800 /dev/zero > big.bin && printf 'ü\\n' > 'späce \"q\".txt'"
    " && seq 1 400000 > long.txt && mkdir -- -rf && echo e > ./-rf/x"
    " && mkdir 'x b' && echo 1 > 'x b/y'"
)


async def test_a_hostile_workspace_is_checkpointed_within_bounds(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([ScriptedTurn()])) as srv:
        cid = await srv.create_conversation()
        await shell(srv, cid, HOSTILE)
        base = f"/api/conversations/{cid}"
        await run(srv, cid)
        [checkpoint] = (await srv.client.get(f"{base}/checkpoints")).json()
        unchanged = (await srv.client.get(f"{base}/diff")).json()
        assert unchanged == {"files": [], "skipped": ["big.bin"], "truncated": False}
        await shell(srv, cid, "rm -rf ./* && echo gone > z")

        diff = (await srv.client.get(f"{base}/diff")).json()
        files = by_path(diff)
        # Names git quotes in a patch header still find their own patch.
        assert files["new\nline"]["status"] == "deleted" and "\n-n\n" in files["new\nline"]["patch"]
        assert files['späce "q".txt']["deletions"] == 1
        assert "\n-ü\n" in files['späce "q".txt']["patch"]
        assert files["x b/y"]["patch"].endswith("\n-1\n")  # header "a/x b/y b/x b/y"
        assert files["out"]["status"] == "deleted"  # the link itself, not /etc/passwd
        assert "-/etc/passwd" in files["out"]["patch"] and "root:" not in files["out"]["patch"]
        assert "big.bin" not in files  # over BURROW_CHECKPOINT_MAX_FILE_MB: never stored
        long = files["long.txt"]
        assert long["deletions"] == 400000 and diff["truncated"] is True
        assert len(long["patch"]) < PATCH_LIMIT_PER_FILE + 200
        assert long["patch"].rstrip().endswith("are left out …]")

        restored = await srv.client.post(f"{base}/checkpoints/{checkpoint['id']}/restore", json={})
        assert restored.status_code == 200, restored.text
        assert await shell(srv, cid, "readlink out root") == "/etc/passwd\n/\n"
        assert await shell(srv, cid, "cat \"$(printf 'new\\nline')\" -- -rf/x") == "n\ne\n"
        assert await shell(srv, cid, "ls z 2>/dev/null || echo none") == "none\n"
        # The 50 MB file was never checkpointed, so it is not brought back, and said so.
        assert await shell(srv, cid, "ls big.bin 2>/dev/null || echo none") == "none\n"


async def test_the_store_is_invisible_to_the_users_own_repository(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([ScriptedTurn(text="hi")])) as srv:
        cid = await srv.create_conversation()
        await shell(srv, cid, "git init -q && echo a > a.txt")
        await run(srv, cid)
        status = await shell(srv, cid, "git status --porcelain --untracked-files=all")
        assert "checkpoints" not in status and "a.txt" in status
        listing = (await srv.client.get(f"/api/conversations/{cid}/files")).json()
        assert ".burrow" not in [e["name"] for e in listing]
        # A second run on an unchanged workspace still gets its checkpoint, with no change.
        await run(srv, cid)
        checkpoints = (await srv.client.get(f"/api/conversations/{cid}/checkpoints")).json()
        assert len(checkpoints) == 2
        diff = await srv.client.get(
            f"/api/conversations/{cid}/diff",
            params={"from": checkpoints[0]["id"], "to": checkpoints[1]["id"]},
        )
        assert diff.json()["files"] == []


async def test_restore_and_revert_wait_for_the_run_to_end(tmp_path: Path) -> None:
    slow = ScriptedProvider([ScriptedTurn(tool_calls=[("bash", {"command": "sleep 60"})])])
    async with running_server(tmp_path, lambda: slow) as srv:
        cid = await srv.create_conversation()
        base = f"/api/conversations/{cid}"
        sent = await srv.send(cid, "go")
        await srv.wait_for(cid, lambda e: e["type"] == "tool.started", timeout=60)
        [checkpoint] = (await srv.client.get(f"{base}/checkpoints")).json()
        refused = await srv.client.post(f"{base}/checkpoints/{checkpoint['id']}/restore", json={})
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_active"
        revert = await srv.client.post(
            f"{base}/files/revert", json={"path": "a", "checkpoint_id": checkpoint["id"]}
        )
        assert revert.status_code == 409
        await srv.client.post(f"{base}/interrupt", json={})
        await srv.run_finished(cid, sent["run_id"], timeout=60)
        after = await srv.client.post(f"{base}/checkpoints/{checkpoint['id']}/restore", json={})
        assert after.status_code == 200, after.text


async def test_a_flood_of_files_and_requests_stays_bounded(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([ScriptedTurn()])) as srv:
        cid = await srv.create_conversation()
        base = f"/api/conversations/{cid}"
        await run(srv, cid)  # the first checkpoint: an empty workspace
        # 1,800 files of 3,000 lines each: some 30 MB of patch text, far over the bound.
        await shell(
            srv,
            cid,
            "mkdir flood && cd flood && for d in $(seq 1 30); do mkdir d$d"
            " && seq -f %g 1 60 | split -l 1 -a 4 - d$d/f; done"
            " && for d in $(seq 1 30); do for f in d$d/f*; do seq 1 3000 > $f; done; done",
        )
        answers = await asyncio.gather(*(srv.client.get(f"{base}/diff") for _ in range(6)))
        bodies = [a.json() for a in answers]
        assert all(a.status_code == 200 for a in answers)
        assert all(b == bodies[0] for b in bodies)  # one at a time: each saw the same store
        body = bodies[0]
        assert len(body["files"]) == 1800 and body["truncated"] is True
        assert all(f["additions"] == 3000 for f in body["files"])
        left_out = [f for f in body["files"] if f["patch"].startswith("[patch left out")]
        assert left_out and sum(len(f["patch"]) for f in body["files"]) < 5 * 1024 * 1024
        patch = await srv.client.get(f"{base}/diff", params={"format": "patch"})
        assert len(patch.content) <= PATCH_LIMIT_TOTAL + 200
        assert patch.text.endswith(
            f"[patch left out: the whole diff passed {PATCH_LIMIT_TOTAL} bytes]\n"
        )


async def test_code_in_the_sandbox_cannot_use_or_break_the_store(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([ScriptedTurn()])) as srv:
        cid = await srv.create_conversation()
        base = f"/api/conversations/{cid}"
        await run(srv, cid)
        # Planted hooks and config (a command git would run) are neither run nor kept.
        await shell(
            srv,
            cid,
            "cd .burrow/checkpoints && mkdir -p hooks"
            " && printf '#!/bin/sh\\ntouch /workspace/hooked\\n' > hooks/reference-transaction"
            " && chmod +x hooks/reference-transaction"
            " && printf '[core]\\n\\tfsmonitor = touch /workspace/monitored\\n' >> config"
            " && cd /workspace && echo new > after.txt",
        )
        # A lock file a killed git left behind does not stop the next checkpoint.
        await shell(srv, cid, "touch .burrow/checkpoints/index.lock")
        await run(srv, cid)
        assert len((await srv.client.get(f"{base}/checkpoints")).json()) == 2
        assert await shell(srv, cid, "ls") == "after.txt\n"
        # A store replaced by a file: the run still goes, only without a checkpoint.
        await shell(srv, cid, "rm -rf .burrow/checkpoints && echo x > .burrow/checkpoints")
        await run(srv, cid)
        assert (await srv.client.get(f"{base}/checkpoints")).json() == []
        broken = await srv.client.get(f"{base}/diff", params={"to": "ck_00"})
        assert broken.status_code == 404
