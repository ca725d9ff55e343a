"""Forks through a real server and real sandboxes: at a run, the new conversation holds the
journal before that run's message and the workspace its starting checkpoint holds (made by
bash: sed -i, rm, mv, a binary), in a checkpoint store of its own; the source is untouched
and the fork's agent carries on from there. Other users, unknown runs and a fork "now"
during a run are refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.conversations.forks import FORKED
from burrow.runs.journal import events as ev
from tests.api.harness import RunningServer, log_in, running_server
from tests.api.test_checkpoints import run, shell

FIRST = (
    "sed -i 's/b/B/' keep.txt && rm gone.txt && mv old.txt moved.txt"
    " && head -c 2000 /dev/urandom > blob.bin && printf 'z\\0' >> blob.bin"
)
SECOND = "echo second >> keep.txt && rm blob.bin && echo n > second.txt"
# The workspace's files and their hashes, Burrow's own folder aside.
HASHES = "find . -path ./.burrow -prune -o -type f -print0 | sort -z | xargs -0 sha256sum"
STORE_TREE = "GIT_DIR=.burrow/checkpoints git rev-parse refs/checkpoints/{id}^{{tree}}"


def scripted() -> ScriptedProvider:
    return ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": FIRST})]),
            ScriptedTurn(text="one done"),
            ScriptedTurn(tool_calls=[("bash", {"command": SECOND})]),
            ScriptedTurn(text="two done"),
        ],
        turn_from_context=True,
    )


def comparable(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["seq"], e["type"], e["run_id"], e["data"], e["ts"]) for e in events]


async def fork(srv: RunningServer, cid: str, **body: Any) -> httpx.Response:
    return await srv.client.post(f"/api/conversations/{cid}/fork", json=body)


async def test_a_fork_at_a_run_holds_what_came_before_it(tmp_path: Path) -> None:
    provider = scripted()
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation("work")
        patched = await srv.client.patch(
            f"/api/conversations/{cid}", json={"approval_mode": "auto", "budget": {"steps": 9}}
        )
        assert patched.status_code == 200, patched.text
        await shell(
            srv, cid, "printf 'a\\nb\\n' > keep.txt && echo g > gone.txt && echo o > old.txt"
        )
        before_first = await shell(srv, cid, HASHES)
        first = await run(srv, cid, "first")
        after_first = await shell(srv, cid, HASHES)
        second = await run(srv, cid, "second")
        source_events = await srv.events(cid)
        source_files = await shell(srv, cid, HASHES)
        checkpoints = (await srv.client.get(f"/api/conversations/{cid}/checkpoints")).json()
        [starting] = [c for c in checkpoints if c["run_id"] == second]

        response = await fork(srv, cid, run_id=second)
        assert response.status_code == 201, response.text
        forked = response.json()
        new = forked["id"]
        assert new != cid and forked["title"] == "work (fork)"
        assert forked["approval_mode"] == "auto" and forked["budget"]["steps"] == 9
        assert forked["status"] == "idle"

        # The journal: gap-free from 1, the source's events up to the second run's message.
        events = await srv.events(new)
        cut = next(i for i, e in enumerate(source_events) if e["run_id"] == second)
        assert source_events[cut]["type"] == "user.message"
        copied = [e for e in events if e["type"] != "sandbox.status" or e["seq"] <= cut]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert comparable(copied) == comparable(source_events[:cut])
        assert all(e["run_id"] != second for e in events)
        assert {e["run_id"] for e in events if e["type"] == "run.finished"} == {first}

        # The workspace: the second run's starting state, byte for byte, as the store had it.
        assert await shell(srv, new, HASHES) == after_first
        assert "moved.txt" in after_first and "gone.txt" not in after_first
        # Its own checkpoint of that state, and the first run's carried as it was (same
        # id, time and run), so the fork can be forked (an Edit) or restored at it in turn.
        [carried, own] = (await srv.client.get(f"/api/conversations/{new}/checkpoints")).json()
        assert own["run_id"] is None and own["size"] > 0
        [at_first] = [c for c in checkpoints if c["run_id"] == first]
        assert {k: carried[k] for k in ("id", "run_id", "created_at")} == {
            k: at_first[k] for k in ("id", "run_id", "created_at")
        }
        assert await shell(srv, new, STORE_TREE.format(id=carried["id"])) == await shell(
            srv, cid, STORE_TREE.format(id=at_first["id"])
        )
        assert await shell(srv, new, STORE_TREE.format(id=own["id"])) == await shell(
            srv, cid, STORE_TREE.format(id=starting["id"])
        )
        # Its changes are the source's up to the fork: since the first run's start.
        diff = (await srv.client.get(f"/api/conversations/{new}/diff")).json()
        source_diff = await srv.client.get(
            f"/api/conversations/{cid}/diff",
            params={"from": at_first["id"], "to": starting["id"]},
        )
        assert diff["files"] == source_diff.json()["files"] != []
        since_fork = await srv.client.get(
            f"/api/conversations/{new}/diff", params={"from": own["id"]}
        )
        assert since_fork.json()["files"] == []

        # The source is untouched.
        assert comparable(await srv.events(cid)) == comparable(source_events)
        assert await shell(srv, cid, HASHES) == source_files
        assert (await srv.client.get(f"/api/conversations/{cid}/checkpoints")).json() == checkpoints

        # The fork's agent carries on from the fork's context: it sees the first exchange,
        # not the second, and answers with the script's second run again.
        again = await run(srv, new, "second, in the fork")
        request = provider.requests[-2]
        said = [m.content for m in request if m.role == "user"]
        assert "first" in said and "second" not in said and "second, in the fork" in said
        assert await shell(srv, new, "cat keep.txt; ls") == (
            "a\nB\nsecond\nkeep.txt\nmoved.txt\nsecond.txt\n"
        )
        assert again != second
        changes = (await srv.client.get(f"/api/conversations/{new}/checkpoints")).json()
        assert len(changes) == 3 and changes[2]["run_id"] == again

        # A fork of the fork at its first run (an Edit of the first message there): the
        # workspace the first run started from.
        refork = await fork(srv, new, run_id=first)
        assert refork.status_code == 201, refork.text
        assert await shell(srv, refork.json()["id"], HASHES) == before_first


async def test_a_fork_now_copies_everything_and_waits_for_a_run(tmp_path: Path) -> None:
    slow = ScriptedProvider(
        [
            ScriptedTurn(text="hello"),
            ScriptedTurn(tool_calls=[("bash", {"command": "sleep 60"})]),
        ],
        turn_from_context=True,
    )
    async with running_server(tmp_path, lambda: slow) as srv:
        cid = await srv.create_conversation()
        done = await run(srv, cid, "hi")
        await shell(srv, cid, "mkdir -p d && echo later > d/f.txt && ln -s d/f.txt link")
        # What it installed into its system comes too (its writable root's layer).
        await shell(srv, cid, "echo mine > /usr/local/bin/mine && useradd dave && rm /etc/issue")
        now = await fork(srv, cid)
        assert now.status_code == 201, now.text
        new = now.json()["id"]
        system = "cat /usr/local/bin/mine; id -un dave; ls /etc/issue 2>&1 | grep -c 'No such'"
        assert await shell(srv, new, system) == "mine\ndave\n1\n"
        await shell(srv, cid, "echo after > /usr/local/bin/after")
        late = await shell(srv, new, "ls /usr/local/bin/after 2>&1 || true")
        assert "No such" in late
        events = await srv.events(new)
        source = await srv.events(cid)
        assert comparable(events[: len(source)]) == comparable(source)
        assert events[len(source) - 1]["type"] == "run.finished"
        assert await shell(srv, new, "cat d/f.txt; readlink link") == "later\nd/f.txt\n"

        sent = await srv.send(cid, "wait")
        await srv.wait_for(cid, lambda e: e["type"] == "tool.started", timeout=60)
        refused = await fork(srv, cid)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_active"
        # At a past run it is harmless while the source runs.
        past = await fork(srv, cid, run_id=done)
        assert past.status_code == 201, past.text
        await srv.client.post(f"/api/conversations/{cid}/interrupt", json={})
        await srv.run_finished(cid, sent["run_id"], timeout=60)


async def test_a_fork_of_a_run_still_open_is_a_finished_journal(tmp_path: Path) -> None:
    slow = ScriptedProvider(
        [ScriptedTurn(tool_calls=[("bash", {"command": "sleep 60"})])], turn_from_context=True
    )
    async with running_server(tmp_path, lambda: slow) as srv:
        cid = await srv.create_conversation()
        sent = await srv.send(cid, "wait")
        await srv.wait_for(cid, lambda e: e["type"] == "tool.started", timeout=60)
        second = await srv.client.post(f"/api/conversations/{cid}/messages", json={"content": "x"})
        assert second.status_code == 202
        # The run itself: its journal before it is empty, its checkpoint the empty workspace.
        at = await fork(srv, cid, run_id=sent["run_id"])
        assert at.status_code == 201, at.text
        assert [e for e in await srv.events(at.json()["id"]) if e["type"] != "sandbox.status"] == []
        await srv.client.post(f"/api/conversations/{cid}/interrupt", json={})
        await srv.run_finished(cid, sent["run_id"], timeout=60)


async def test_forks_are_refused_to_strangers_and_for_unknown_runs(tmp_path: Path) -> None:
    async with running_server(tmp_path, scripted) as srv:
        cid = await srv.create_conversation()
        run_id = await run(srv, cid, "first")
        for body in ({"run_id": "r_0000000000000000"}, {"run_id": "x" * 64}):
            missing = await fork(srv, cid, **body)
            assert missing.status_code == 404, missing.text
            assert missing.json()["error"]["code"] == "run_not_found"
        too_long = await fork(srv, cid, run_id="x" * 65)
        assert too_long.status_code == 422
        assert (await fork(srv, "c_0000000000000000")).status_code == 404

        made = await srv.client.post("/api/users", json={"username": "eve", "password": "eve-pw-1"})
        assert made.status_code == 201, made.text
        async with httpx.AsyncClient(base_url=srv.base_url) as eve:
            await log_in(eve, "eve", "eve-pw-1")
            for body in ({}, {"run_id": run_id}):
                stolen = await eve.post(f"/api/conversations/{cid}/fork", json=body)
                assert stolen.status_code == 404, stolen.text
            assert (await eve.get("/api/conversations")).json() == []
            # A foreign Origin is refused before anything is copied.
            foreign = await srv.client.post(
                f"/api/conversations/{cid}/fork",
                json={},
                headers={"Origin": "https://evil.example"},
            )
            assert foreign.status_code == 403
        titles = [c["title"] for c in (await srv.client.get("/api/conversations")).json()]
        assert titles == ["test"]

        # Deleting a fork leaves the source and its checkpoints as they were.
        copy = (await fork(srv, cid, run_id=run_id)).json()["id"]
        assert (await srv.client.delete(f"/api/conversations/{copy}")).status_code == 204
        assert len((await srv.client.get(f"/api/conversations/{cid}/checkpoints")).json()) == 1


async def test_a_fork_now_as_soon_as_the_run_is_seen_ending(tmp_path: Path, pg_url: str) -> None:
    """run.finished is the run's end for a client: what the server has left after it (the
    follow-up decision, its lease given back, slow on a busy PostgreSQL) is not a run."""
    async with running_server(tmp_path, scripted, database_url=pg_url) as srv:
        leases = srv.services.runtime.leases
        give_back = leases.give_back
        released = asyncio.Event()

        async def slow_give_back(cid: str) -> None:
            await asyncio.sleep(0.5)
            await give_back(cid)
            released.set()

        leases.give_back = slow_give_back  # type: ignore[method-assign]
        cid = await srv.create_conversation()
        await run(srv, cid, "first")
        assert not released.is_set()  # the fork below comes while the lease is given back
        response = await fork(srv, cid)
        assert response.status_code == 201, response.text
        assert released.is_set()  # it waited for the lease, not answered "a run goes"


async def test_a_fork_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    async with running_server(tmp_path, scripted, database_url=pg_url) as srv:
        cid = await srv.create_conversation("pg")
        await run(srv, cid, "first")
        await shell(srv, cid, "echo now > now.txt")
        response = await fork(srv, cid)
        assert response.status_code == 201, response.text
        new = response.json()["id"]
        source, copied = await srv.events(cid), await srv.events(new)
        assert comparable(copied[: len(source)]) == comparable(source)
        assert response.json()["title"] == "pg (fork)"
        # Its usage is what its journal holds: the source's, spent once already.
        whole = (await srv.client.get(f"/api/conversations/{cid}")).json()
        assert response.json()["usage"] == whole["usage"]
        assert response.json()["usage"]["prompt_tokens"] > 0
        assert await shell(srv, new, "cat now.txt") == "now\n"
        # The fork's numbering goes on from its copy.
        await run(srv, new, "more")
        seqs = [e["seq"] for e in await srv.events(new)]
        assert seqs == list(range(1, len(seqs) + 1))


async def test_what_a_dead_server_left_open_is_closed_in_the_fork(tmp_path: Path) -> None:
    async with running_server(tmp_path, scripted) as srv:
        cid = await srv.create_conversation()
        # A journal as a server killed mid-call leaves it, before the restart repairs it.
        await srv.services.journal.append(
            cid,
            ev.make(ev.UserMessage(content="go", steering=False), "r_dead"),
            ev.make(ev.RunStarted(run_id="r_dead"), "r_dead"),
            ev.make(ev.ToolStarted(call_id="c1", name="bash", arguments={}), "r_dead"),
        )
        response = await fork(srv, cid)
        assert response.status_code == 201, response.text
        assert response.json()["last_run_failed"] is True
        events = [
            e for e in await srv.events(response.json()["id"]) if e["type"] != "sandbox.status"
        ]
        assert [e["type"] for e in events] == [
            "user.message",
            "run.started",
            "tool.started",
            "tool.finished",
            "run.finished",
        ]
        assert events[3]["data"]["is_error"] is True and events[4]["data"]["status"] == "failed"
        assert events[4]["data"]["error"] == FORKED
        # The source keeps its journal as it was.
        kept = [e["type"] for e in await srv.events(cid) if e["type"] != "sandbox.status"]
        assert kept[-1] == "tool.started"


async def test_forks_made_at_once_are_each_whole(tmp_path: Path) -> None:
    async with running_server(tmp_path, scripted) as srv:
        cid = await srv.create_conversation()
        run_id = await run(srv, cid, "first")
        await shell(srv, cid, "echo later > later.txt")
        answers = await asyncio.gather(
            *(fork(srv, cid, **({"run_id": run_id} if i % 2 else {})) for i in range(4))
        )
        assert [a.status_code for a in answers] == [201] * 4, [a.text for a in answers]
        ids = {a.json()["id"] for a in answers}
        assert len(ids) == 4
        for i, answer in enumerate(answers):
            files = await shell(srv, answer.json()["id"], "ls")
            assert files == ("" if i % 2 else "later.txt\n")
