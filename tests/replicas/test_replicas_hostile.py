"""Replicas under hostile input: another user reaching through the other replica, junk
and floods on the notification channels, and a flood of commands routed to one owner."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.api.harness import log_in, sse_events
from tests.replicas.cluster import client, replicas, script


def bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


async def first(events: Any, kind: str, timeout: float = 30) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        async for event in events:
            if event["type"] == kind:
                return dict(event)
    raise AssertionError(f"no {kind}")


async def test_another_user_cannot_steer_stop_or_answer_through_the_other_replica(
    tmp_path: Path, pg_url: str
) -> None:
    model = script(tmp_path / "m.json", [bash("sleep 8"), {"text": "done"}])
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            made = await a.post("/api/users", json={"username": "mallory", "password": "x" * 12})
            assert made.status_code == 201, made.text
            cid = (await a.post("/api/conversations", json={})).json()["id"]
            run_id = (
                await a.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
            ).json()["run_id"]
            events = sse_events(b, cid)
            await first(events, "tool.started")
            async with httpx.AsyncClient(base_url=nodes["b"].base, timeout=10) as mallory:
                await log_in(mallory, "mallory", "x" * 12)
                for method, path, body in [
                    ("POST", f"/api/conversations/{cid}/interrupt", {}),
                    ("POST", f"/api/conversations/{cid}/messages", {"content": "hi"}),
                    ("POST", f"/api/conversations/{cid}/approvals/ap_0", {"decision": "deny"}),
                ]:
                    response = await mallory.request(method, path, json=body)
                    assert response.status_code == 404, (path, response.text)
            finished = await first(events, "run.finished")
            assert finished["run_id"] == run_id and finished["data"]["status"] == "completed"
            journal = (await a.get(f"/api/conversations/{cid}/events?format=json")).json()
            assert [e["data"]["content"] for e in journal if e["type"] == "user.message"] == ["go"]


async def test_junk_and_floods_on_the_channels_leave_replicas_working(
    tmp_path: Path, pg_url: str
) -> None:
    model = script(tmp_path / "m.json", [bash("echo hi"), {"text": "done"}])
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            cid = (await a.post("/api/conversations", json={})).json()["id"]
            seen: list[dict[str, Any]] = []

            async def follow() -> None:
                async for event in sse_events(b, cid):
                    seen.append(event)
                    if event["type"] == "run.finished":
                        return

            follower = asyncio.create_task(follow())  # B follows while the junk arrives
            await asyncio.sleep(0.5)
            # A peer with database access sends junk: malformed payloads, commands for ids
            # that do not exist, and a flood of event notices for conversations and seqs
            # nobody has (one of them the followed conversation, far in the future).
            junk = ["", "x", "a b", "run a", "run a cmd_nope", "done b cmd_nope", "é" * 1000]
            junk.append(f"{cid} x y z")
            conn = await asyncpg.connect(pg_url.replace("postgresql+asyncpg", "postgresql"))
            try:
                for channel in ("burrow_events", "burrow_commands"):
                    for payload in junk:
                        await conn.execute("SELECT pg_notify($1, $2)", channel, payload)
                await conn.execute(
                    "SELECT pg_notify('burrow_events', 'c_' || g || ' 1 1 evil') "
                    "FROM generate_series(1, 20000) g"
                )
                await conn.execute(
                    "SELECT pg_notify('burrow_events', $1)", f"{cid} 999999 1000000 evil"
                )
            finally:
                await conn.close()
            for http in (a, b):
                started = time.monotonic()
                health = await http.get("/api/health", timeout=5)
                assert health.status_code == 200
                assert time.monotonic() - started < 2

            # Live delivery across replicas still works, gap-free, after all that.
            sent = await a.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
            assert sent.status_code == 202
            await asyncio.wait_for(follower, 30)
            assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))


async def test_a_flood_of_steering_through_b_is_each_journaled_once(
    tmp_path: Path, pg_url: str
) -> None:
    model = script(tmp_path / "m.json", [bash("sleep 5")] + [{"text": "ok"}] * 5)
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"], timeout=60) as b:
            cid = (await a.post("/api/conversations", json={})).json()["id"]
            run_id = (
                await a.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
            ).json()["run_id"]
            events = sse_events(b, cid)
            await first(events, "tool.started")
            sends = await asyncio.gather(
                *(
                    b.post(f"/api/conversations/{cid}/messages", json={"content": f"m{i}"})
                    for i in range(40)
                )
            )
            assert {r.status_code for r in sends} == {202}
            assert {r.json()["run_id"] for r in sends} == {run_id}
            await first(events, "run.finished", timeout=60)
            journal = (await a.get(f"/api/conversations/{cid}/events?format=json")).json()
            steering = [
                e["data"]["content"]
                for e in journal
                if e["type"] == "user.message" and e["data"]["steering"]
            ]
            assert sorted(steering) == sorted(f"m{i}" for i in range(40))
            conn = await asyncpg.connect(pg_url.replace("postgresql+asyncpg", "postgresql"))
            try:
                assert await conn.fetchval("SELECT count(*) FROM run_commands") == 0
            finally:
                await conn.close()


async def test_a_dropped_listen_connection_reconnects_and_followers_heal(
    tmp_path: Path, pg_url: str
) -> None:
    model = script(tmp_path / "m.json", [bash("sleep 1; echo a"), {"text": "done"}])
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with client(nodes["a"]) as a, client(nodes["b"]) as b:
            cid = (await a.post("/api/conversations", json={})).json()["id"]
            seen: list[dict[str, Any]] = []

            async def follow() -> None:
                async for event in sse_events(b, cid):
                    seen.append(event)
                    if event["type"] == "run.finished":
                        return

            follower = asyncio.create_task(follow())
            await asyncio.sleep(0.5)
            conn = await asyncpg.connect(pg_url.replace("postgresql+asyncpg", "postgresql"))
            try:
                # B's LISTEN connection dies (a failover, a proxy timeout): whatever A
                # commits meanwhile is never notified to B.
                killed = await conn.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = 'burrow-listen b'"
                )
                assert killed == 1
                sent = await a.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
                assert sent.status_code == 202
                await asyncio.wait_for(follower, 30)  # B reconnected, its follower healed
                back = await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE application_name = 'burrow-listen b'"
                )
                assert back == 1
            finally:
                await conn.close()
            assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
            assert seen[-1]["type"] == "run.finished"


async def test_failed_logins_count_on_every_replica(tmp_path: Path, pg_url: str) -> None:
    model = script(tmp_path / "m.json", [])
    wrong = {"username": "admin", "password": "guess"}
    with replicas(tmp_path, pg_url, {"a": model, "b": model}) as nodes:
        async with (
            httpx.AsyncClient(base_url=nodes["a"].base, timeout=30) as a,
            httpx.AsyncClient(base_url=nodes["b"].base, timeout=30) as b,
        ):
            for _ in range(5):  # guesses spread over both replicas, as a balancer would
                for http in (a, b):
                    assert (await http.post("/api/auth/login", json=wrong)).status_code == 401
            # 10 failures in all: the account is throttled from this address on both.
            for http in (a, b):
                refused = await http.post("/api/auth/login", json=wrong)
                assert refused.status_code == 429, refused.text
                assert refused.json()["error"]["code"] == "too_many_attempts"
                assert 1 <= int(refused.headers["Retry-After"]) <= 300
            # Another account from the same address is not locked out by these.
            other = {"username": "nobody", "password": "guess"}
            assert (await b.post("/api/auth/login", json=other)).status_code == 401
            # Stored as digests: no address or username at rest.
            conn = await asyncpg.connect(pg_url.replace("postgresql+asyncpg", "postgresql"))
            try:
                keys = await conn.fetch("SELECT key FROM login_failures")
            finally:
                await conn.close()
            assert keys and all(len(k["key"]) == 64 and "admin" not in k["key"] for k in keys)
