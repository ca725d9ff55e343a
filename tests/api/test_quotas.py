"""Quotas per user: concurrent runs and live sandboxes are capped per account, and one
account at its caps leaves another unaffected."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx

from burrow.llm.base import Done, Message, ScriptedTurn, StreamEvent, TextDelta, ToolSpec
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, log_in, running_server


class SlowModel:
    """Answers only when released, so runs stay going for as long as the test needs."""

    name = "slow"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        await self.release.wait()
        yield TextDelta("done")
        yield Done()


@contextlib.asynccontextmanager
async def second_user(srv: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    made = await srv.client.post("/api/users", json={"username": "bob", "password": "bob-pw-123"})
    assert made.status_code == 201, made.text
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as bob:
        await log_in(bob, "bob", "bob-pw-123")
        yield bob


async def new_conversation(client: httpx.AsyncClient) -> str:
    response = await client.post("/api/conversations", json={})
    assert response.status_code == 201, response.text
    cid: str = response.json()["id"]
    return cid


async def test_concurrent_runs_are_capped_per_user(tmp_path: Path) -> None:
    model = SlowModel()
    async with running_server(tmp_path, lambda: model, max_runs_per_user=2) as srv:
        cids = [await srv.create_conversation() for _ in range(4)]
        # Four at once: the count and the reservation cannot be raced past the cap.
        sent = await asyncio.gather(
            *(
                srv.client.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
                for cid in cids
            )
        )
        assert Counter(r.status_code for r in sent) == {202: 2, 429: 2}
        going = [cid for cid, r in zip(cids, sent, strict=True) if r.status_code == 202]
        refused = [r for r in sent if r.status_code == 429]
        for response in refused:
            error = response.json()["error"]
            assert error["code"] == "too_many_runs"
            assert "BURROW_MAX_RUNS_PER_USER" in error["message"]
        refused_cid = next(c for c, r in zip(cids, sent, strict=True) if r.status_code == 429)
        assert await srv.events(refused_cid) == []  # refused before anything was journaled

        # Steering a run that is going is not a new run.
        steered = await srv.client.post(
            f"/api/conversations/{going[0]}/messages", json={"content": "also this"}
        )
        assert steered.status_code == 202
        assert steered.json()["run_id"] == sent[cids.index(going[0])].json()["run_id"]

        # Another account is not starved by this one.
        async with second_user(srv) as bob:
            bobs = await new_conversation(bob)
            r = await bob.post(f"/api/conversations/{bobs}/messages", json={"content": "hi"})
            assert r.status_code == 202, r.text

            # When runs end, their places free up.
            model.release.set()
            for cid, response in zip(cids, sent, strict=True):
                if response.status_code == 202:
                    await srv.run_finished(cid, response.json()["run_id"])
            again = await srv.send(refused_cid, "now")
            await srv.run_finished(refused_cid, again["run_id"])


BUSY = ScriptedTurn(tool_calls=[("bash", {"command": "echo started; sleep 60"})])


async def sandbox_status(srv: RunningServer, cid: str) -> dict[str, str]:
    response = await srv.client.get(f"/api/conversations/{cid}/sandbox")
    assert response.status_code == 200
    status: dict[str, str] = response.json()
    return status


async def test_live_sandboxes_are_capped_per_user(tmp_path: Path) -> None:
    provider = ScriptedProvider([BUSY, ScriptedTurn(text="stopped")], turn_from_context=True)
    async with running_server(tmp_path, lambda: provider, max_sandboxes_per_user=2) as srv:
        first, second, third = [await srv.create_conversation() for _ in range(3)]
        for cid in (first, second):
            assert (await srv.client.get(f"/api/conversations/{cid}/files")).status_code == 200
        # At the cap, the least recently used idle sandbox hibernates to make room.
        assert (await srv.client.get(f"/api/conversations/{third}/files")).status_code == 200
        hibernated = await sandbox_status(srv, first)
        assert hibernated["status"] == "hibernated", hibernated
        assert "make room" in hibernated["detail"]
        assert (await sandbox_status(srv, second))["status"] == "ready"

        # Both live sandboxes busy with a command: a third is refused, and says why.
        runs = {}
        for cid in (second, third):
            runs[cid] = (await srv.send(cid, "work"))["run_id"]
            await srv.wait_for(
                cid, lambda e: e["type"] == "tool.output" and "started" in e["data"]["text"]
            )
        refused = await srv.client.get(f"/api/conversations/{first}/files")
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "too_many_sandboxes"
        assert "BURROW_MAX_SANDBOXES_PER_USER" in error["message"]
        assert (await sandbox_status(srv, first))["status"] == "hibernated"  # not "failed"

        # Another account gets its sandbox meanwhile.
        async with second_user(srv) as bob:
            bobs = await new_conversation(bob)
            assert (await bob.get(f"/api/conversations/{bobs}/files")).status_code == 200

        # One command ends: its sandbox is idle again and makes room.
        await srv.client.post(f"/api/conversations/{second}/interrupt", json={})
        await srv.run_finished(second, runs[second])
        woke = await srv.client.get(f"/api/conversations/{first}/files")
        assert woke.status_code == 200, woke.text
        assert (await sandbox_status(srv, second))["status"] == "hibernated"
        assert (await sandbox_status(srv, third))["status"] == "ready"
        await srv.client.post(f"/api/conversations/{third}/interrupt", json={})
