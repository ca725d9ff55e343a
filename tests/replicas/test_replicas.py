"""Two `burrow serve` replicas on one PostgreSQL: live events across replicas, commands
routed to a run's owner, a dead owner's run taken over, and a race for one conversation."""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.api.harness import sse_events
from tests.replicas.cluster import (
    LEASE_SECONDS,
    client,
    lease_holder,
    lease_released,
    replicas,
    script,
)

RISKY = {"command": "mkdir -p build && rm -rf build", "timeout": 30}


def bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


async def collect_until(
    http: httpx.AsyncClient, cid: str, last_type: str, into: list[tuple[float, dict[str, Any]]]
) -> None:
    """Follow the stream, noting when each event arrived, until an event of `last_type`."""
    async for event in sse_events(http, cid):
        into.append((time.time(), event))
        if event["type"] == last_type:
            return


async def test_a_client_on_b_sees_a_run_on_a_live_in_order(tmp_path: Path, pg_url: str) -> None:
    model = script(tmp_path / "a.json", [bash("echo one; sleep 1; echo two"), {"text": "done"}])
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            cid = (await a.post("/api/conversations", json={})).json()["id"]
            seen: list[tuple[float, dict[str, Any]]] = []
            follower = asyncio.create_task(collect_until(b, cid, "run.finished", seen))
            await asyncio.sleep(0.5)  # B's stream is attached before the run starts
            sent = await a.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
            assert sent.status_code == 202
            await asyncio.wait_for(follower, 30)
            assert await lease_released(pg_url, cid)  # given back at the end

            journal = (await a.get(f"/api/conversations/{cid}/events?format=json")).json()
            got = [e for _, e in seen]
            assert got == journal  # every event, in order, gap-free, no duplicate
            assert [e["seq"] for e in got] == list(range(1, len(got) + 1))
            # Live: B had the tool's start before A even wrote the run's end (it sleeps 1 s).
            received = next(t for t, e in seen if e["type"] == "tool.started")
            ended = datetime.fromisoformat(got[-1]["ts"]).timestamp()
            assert received < ended, (received, ended)


async def test_message_approval_and_interrupt_sent_to_b_reach_the_run_on_a(
    tmp_path: Path, pg_url: str
) -> None:
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": RISKY}]},
        bash("sleep 30"),
        {"text": "not reached"},
    ]
    model = script(tmp_path / "a.json", turns)
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            cid = (await a.post("/api/conversations", json={})).json()["id"]
            run_id = (
                await a.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
            ).json()["run_id"]
            events = sse_events(b, cid)
            async with asyncio.timeout(30):
                asked = await anext(e async for e in events if e["type"] == "approval.requested")
            assert await lease_holder(pg_url, cid) == "a"

            request_id = asked["data"]["request_id"]
            answered = await b.post(
                f"/api/conversations/{cid}/approvals/{request_id}",
                json={"decision": "allow_once"},
            )
            assert answered.status_code == 200, answered.text
            assert answered.json() == {"request_id": request_id, "decision": "allow_once"}
            again = await b.post(
                f"/api/conversations/{cid}/approvals/{request_id}", json={"decision": "deny"}
            )
            assert again.status_code == 409 and again.json()["error"]["code"] == "not_waiting"

            async with asyncio.timeout(30):
                await anext(
                    e
                    async for e in events
                    if e["type"] == "tool.started" and "sleep" in str(e["data"]["arguments"])
                )
            steer = await b.post(f"/api/conversations/{cid}/messages", json={"content": "also"})
            assert steer.status_code == 202
            assert steer.json()["run_id"] == run_id  # steering of A's run, not a new run
            stopped = await b.post(f"/api/conversations/{cid}/interrupt", json={})
            assert stopped.status_code == 202 and stopped.json()["run_id"] == run_id
            async with asyncio.timeout(30):
                finished = await anext(e async for e in events if e["type"] == "run.finished")
            assert finished["data"]["status"] == "canceled"

            journal = (await a.get(f"/api/conversations/{cid}/events?format=json")).json()
            types = [e["type"] for e in journal]
            assert types.count("run.started") == 1 and types.count("run.finished") == 1
            steering = [e for e in journal if e["type"] == "user.message" and e["data"]["steering"]]
            assert [e["data"]["content"] for e in steering] == ["also"]
            resolved = [e["data"] for e in journal if e["type"] == "approval.resolved"]
            assert resolved == [{"request_id": request_id, "decision": "allow_once"}]
            # Nothing left behind: no lease, no command rows.
            assert await lease_released(pg_url, cid)


async def test_killing_the_owner_hands_its_run_to_the_other_replica(
    tmp_path: Path, pg_url: str
) -> None:
    on_a = script(tmp_path / "a.json", [bash("sleep 60")])
    on_b = script(tmp_path / "b.json", [{"text": "back on b"}])
    with replicas(tmp_path, pg_url, {"a": on_a, "b": on_b}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            cid = (await a.post("/api/conversations", json={})).json()["id"]
            await a.post(f"/api/conversations/{cid}/messages", json={"content": "sleep"})
            events = sse_events(b, cid)
            async with asyncio.timeout(30):
                await anext(e async for e in events if e["type"] == "tool.started")
            nodes["a"].process.kill()  # SIGKILL: no shutdown code, the lease just stops
            killed = time.monotonic()
            async with asyncio.timeout(LEASE_SECONDS * 3):
                finished = await anext(e async for e in events if e["type"] == "run.finished")
            took = time.monotonic() - killed
            # Within the lease (plus the sweep period, a third of it, and slack).
            assert took <= LEASE_SECONDS + LEASE_SECONDS / 3 + 1.5, took
            assert finished["data"]["status"] == "failed"
            assert "stopped answering" in finished["data"]["error"]
            await events.aclose()

            journal = (await b.get(f"/api/conversations/{cid}/events?format=json")).json()
            types = [e["type"] for e in journal]
            assert types.count("tool.started") == types.count("tool.finished") == 1
            assert types.count("run.finished") == 1
            assert (await b.get(f"/api/conversations/{cid}")).json()["status"] == "idle"

            # The conversation goes on, on B.
            sent = await b.post(f"/api/conversations/{cid}/messages", json={"content": "again"})
            assert sent.status_code == 202, sent.text
            async with asyncio.timeout(30):
                async for event in sse_events(b, cid, last_event_id=journal[-1]["seq"]):
                    if event["type"] == "run.finished":
                        assert event["data"]["status"] == "completed"
                        break
            assert await lease_released(pg_url, cid)


async def test_two_replicas_racing_to_start_a_run_start_exactly_one(
    tmp_path: Path, pg_url: str
) -> None:
    model = script(tmp_path / "m.json", [bash("sleep 2"), {"text": "done"}])
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            for round_ in range(3):
                cid = (await a.post("/api/conversations", json={})).json()["id"]
                sends = await asyncio.gather(
                    a.post(f"/api/conversations/{cid}/messages", json={"content": "from a"}),
                    b.post(f"/api/conversations/{cid}/messages", json={"content": "from b"}),
                )
                assert [r.status_code for r in sends] == [202, 202], round_
                run_ids = {r.json()["run_id"] for r in sends}
                assert len(run_ids) == 1  # one run; the other message steers it
                async with asyncio.timeout(30):
                    async for event in sse_events(a, cid):
                        if event["type"] == "run.finished":
                            break
                journal = (await b.get(f"/api/conversations/{cid}/events?format=json")).json()
                assert [e["type"] for e in journal].count("run.started") == 1
                messages = [e["data"] for e in journal if e["type"] == "user.message"]
                assert sorted(m["content"] for m in messages) == ["from a", "from b"]
                assert [m["steering"] for m in messages] == [False, True]


async def test_b_refuses_what_waits_for_a_run_on_a_and_deleting_on_b_stops_it(
    tmp_path: Path, pg_url: str
) -> None:
    model = script(tmp_path / "m.json", [bash("sleep 60")])
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            cid = (await a.post("/api/conversations", json={})).json()["id"]
            await a.post(f"/api/conversations/{cid}/messages", json={"content": "sleep"})
            events = sse_events(a, cid)
            async with asyncio.timeout(30):
                await anext(e async for e in events if e["type"] == "tool.started")
            compact = await b.post(f"/api/conversations/{cid}/compact", json={})
            assert compact.status_code == 409 and compact.json()["error"]["code"] == "run_active"
            fork = await b.post(f"/api/conversations/{cid}/fork", json={})
            assert fork.status_code == 409, fork.text

            deleted = await b.delete(f"/api/conversations/{cid}")
            assert deleted.status_code == 204
            async with asyncio.timeout(30):
                finished = await anext(e async for e in events if e["type"] == "run.finished")
            assert finished["data"]["status"] == "canceled"  # A stopped it before the delete
            assert (await a.get(f"/api/conversations/{cid}")).status_code == 404
            assert await lease_released(pg_url, cid)


async def test_an_owner_that_stalls_past_its_lease_writes_nothing_after_the_takeover(
    tmp_path: Path, pg_url: str
) -> None:
    model = script(tmp_path / "m.json", [bash("sleep 60")])
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            cid = (await a.post("/api/conversations", json={})).json()["id"]
            await a.post(f"/api/conversations/{cid}/messages", json={"content": "sleep"})
            events = sse_events(b, cid)
            async with asyncio.timeout(30):
                await anext(e async for e in events if e["type"] == "tool.started")
            await a.aclose()
            nodes["a"].process.send_signal(signal.SIGSTOP)  # frozen, not dead
            try:
                async with asyncio.timeout(LEASE_SECONDS * 4):
                    finished = await anext(e async for e in events if e["type"] == "run.finished")
                assert "stopped answering" in finished["data"]["error"]
            finally:
                nodes["a"].process.send_signal(signal.SIGCONT)
            # A wakes, finds at its next renewal that B took the run, and stops it: its
            # closing events are refused by the lease fence, so nothing follows B's repair.
            await asyncio.sleep(LEASE_SECONDS)
            journal = (await b.get(f"/api/conversations/{cid}/events?format=json")).json()
            types = [e["type"] for e in journal]
            assert types[-1] == "run.finished", types
            assert types.count("run.finished") == 1 and types.count("tool.finished") == 1
            assert await lease_released(pg_url, cid)
            sent = await b.post(f"/api/conversations/{cid}/messages", json={"content": "on"})
            assert sent.status_code == 202, sent.text


async def test_a_message_routed_to_an_owner_that_died_is_taken_back_and_run_here(
    tmp_path: Path, pg_url: str
) -> None:
    on_a = script(tmp_path / "a.json", [bash("sleep 60")])
    on_b = script(tmp_path / "b.json", [{"text": "answered on b"}])
    with replicas(tmp_path, pg_url, {"a": on_a, "b": on_b}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            cid = (await a.post("/api/conversations", json={})).json()["id"]
            first = await a.post(f"/api/conversations/{cid}/messages", json={"content": "one"})
            events = sse_events(b, cid)
            async with asyncio.timeout(30):
                await anext(e async for e in events if e["type"] == "tool.started")
            nodes["a"].process.kill()
            # At once, while A's lease still looks alive: B asks A, A never answers, the
            # lease lapses, B takes the message back, repairs A's run and starts its own.
            started = time.monotonic()
            sent = await b.post(f"/api/conversations/{cid}/messages", json={"content": "two"})
            assert sent.status_code == 202, sent.text
            assert time.monotonic() - started <= LEASE_SECONDS + 3
            run_id = sent.json()["run_id"]
            assert run_id != first.json()["run_id"]
            async with asyncio.timeout(30):
                done = await anext(
                    e async for e in events if e["type"] == "run.finished" and e["run_id"] == run_id
                )
            assert done["data"]["status"] == "completed"
            journal = (await b.get(f"/api/conversations/{cid}/events?format=json")).json()
            runs = [(e["type"], e["run_id"]) for e in journal if e["type"].startswith("run.")]
            old = first.json()["run_id"]
            # The dead run is closed before the new one starts: each started once, ended once.
            assert runs == [
                ("run.started", old),
                ("run.finished", old),
                ("run.started", run_id),
                ("run.finished", run_id),
            ]
            conn = await asyncpg.connect(pg_url.replace("postgresql+asyncpg", "postgresql"))
            try:
                assert await conn.fetchval("SELECT count(*) FROM run_commands") == 0
            finally:
                await conn.close()


async def test_a_plan_decided_on_b_continues_the_run_waiting_on_a(
    tmp_path: Path, pg_url: str
) -> None:
    todo = {"items": [{"text": "write out.txt", "done": False}]}
    turns = [
        {"tool_calls": [{"name": "todo", "arguments": todo}]},
        {"text": "That is my plan."},
        bash("echo done > out.txt"),
        {"text": "Done."},
    ]
    model = script(tmp_path / "a.json", turns)
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            made = await a.post("/api/conversations", json={"approval_mode": "plan"})
            cid = made.json()["id"]
            await a.post(f"/api/conversations/{cid}/messages", json={"content": "plan it"})
            events = sse_events(b, cid)
            async with asyncio.timeout(30):
                proposed = await anext(e async for e in events if e["type"] == "plan.proposed")
            assert await lease_holder(pg_url, cid) == "a"
            plan_id = proposed["data"]["plan_id"]
            decided = await b.post(
                f"/api/conversations/{cid}/plans/{plan_id}",
                json={"decision": "approve", "mode": "auto"},
            )
            assert decided.status_code == 200, decided.text
            async with asyncio.timeout(30):
                finished = await anext(e async for e in events if e["type"] == "run.finished")
            assert finished["data"]["status"] == "completed"
            journal = (await a.get(f"/api/conversations/{cid}/events?format=json")).json()
            ran = [e for e in journal if e["type"] == "tool.finished"]
            assert ran and not ran[-1]["data"]["is_error"], ran  # the write ran, after approval
            again = await b.post(
                f"/api/conversations/{cid}/plans/{plan_id}", json={"decision": "reject"}
            )
            assert again.status_code == 409
