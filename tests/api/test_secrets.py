"""Per-user secrets through a real server: write-only, per user, chosen per conversation,
given to real sandbox commands and terminals, and masked as **** wherever output goes —
also when a hostile command prints a value a byte at a time."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

from burrow.llm.openai_compat import OpenAICompatProvider
from tests.api.harness import RunningServer, log_in, running_server
from tests.api.test_terminals import open_terminal, read_until, session_cookie, ws_url
from tests.fakes import FakeOpenAIServer, text_reply, tool_call_reply

VALUE = "ghp_Zq7hunter2-Secret-Value-91x"
# Prints $TOKEN one character at a time with a pause between (each its own output chunk),
# on stdout and on stderr, then its length: the value never leaves in one piece.
DRIP = (
    'for i in $(seq 0 $((${#TOKEN}-1))); do printf %s "${TOKEN:$i:1}"; sleep 0.03; done; echo;'
    ' for i in $(seq 0 $((${#TOKEN}-1))); do printf %s "${TOKEN:$i:1}" >&2; sleep 0.02; done;'
    ' echo "len=${#TOKEN}"'
)


async def put_secret(client: httpx.AsyncClient, name: str, value: str) -> httpx.Response:
    return await client.put(f"/api/secrets/{name}", json={"value": value})


async def choose(srv: RunningServer, cid: str, names: list[str]) -> httpx.Response:
    return await srv.client.patch(f"/api/conversations/{cid}", json={"secrets": names})


@contextlib.asynccontextmanager
async def second_user(srv: RunningServer, name: str) -> AsyncIterator[httpx.AsyncClient]:
    created = await srv.client.post(
        "/api/users", json={"username": name, "password": f"{name}-password-1"}
    )
    assert created.status_code in (200, 201), created.text
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as other:
        await log_in(other, name, f"{name}-password-1")
        yield other


def database_bytes(data_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in data_dir.glob("burrow.db*"))


async def test_secrets_are_write_only_validated_and_per_user(tmp_path: Path) -> None:
    async with running_server(tmp_path, None) as srv:
        put = await put_secret(srv.client, "TOKEN", VALUE)
        assert put.status_code == 200, put.text
        assert put.json()["name"] == "TOKEN" and VALUE not in put.text
        listed = await srv.client.get("/api/secrets")
        assert [s["name"] for s in listed.json()] == ["TOKEN"]
        assert set(listed.json()[0]) == {"name", "updated_at"}
        assert VALUE not in listed.text

        for bad in (
            "1TOKEN",
            "A-B",
            "PATH",
            "HOME",
            "LD_PRELOAD",
            "BASH_ENV",
            "BURROW_X",
            "x" * 129,
        ):
            refused = await put_secret(srv.client, bad, VALUE)
            assert refused.status_code in (400, 422), (bad, refused.text)
            assert refused.json()["error"]["message"], bad
        reserved = (await put_secret(srv.client, "LD_PRELOAD", VALUE)).json()["error"]
        assert reserved["code"] == "invalid_secret" and "reserved" in reserved["message"]
        short = await put_secret(srv.client, "SHORT", "abc")
        assert short.status_code == 400 and "at least 4" in short.json()["error"]["message"]
        huge = await put_secret(srv.client, "HUGE", "x" * 9000)
        assert huge.status_code == 422
        broken = await srv.client.put(
            "/api/secrets/BROKEN",
            content=b'{"value": "abc\\ud800def"}',
            headers={"content-type": "application/json"},
        )
        assert broken.status_code == 422, broken.text  # a lone surrogate: refused at the edge
        wide = await put_secret(srv.client, "WIDE", "é" * 5000)  # 5000 chars, 10000 bytes
        assert wide.status_code == 400 and "8192 bytes" in wide.json()["error"]["message"]

        cid = await srv.create_conversation()
        unknown = await choose(srv, cid, ["TOKEN", "NOPE", "ALSO_NOPE"])
        assert unknown.status_code == 400
        assert unknown.json()["error"]["code"] == "unknown_secrets"
        assert "ALSO_NOPE, NOPE" in unknown.json()["error"]["message"]
        chosen = await choose(srv, cid, ["TOKEN"])
        assert chosen.status_code == 200 and chosen.json()["secrets"] == ["TOKEN"]
        assert (await srv.client.get(f"/api/conversations/{cid}")).json()["secrets"] == ["TOKEN"]

        async with second_user(srv, "bob") as bob:
            assert (await bob.get("/api/secrets")).json() == []
            bob_cid = (await bob.post("/api/conversations", json={})).json()["id"]
            stolen = await bob.patch(f"/api/conversations/{bob_cid}", json={"secrets": ["TOKEN"]})
            assert stolen.status_code == 400 and "TOKEN" in stolen.json()["error"]["message"]
            assert (await bob.delete("/api/secrets/TOKEN")).status_code == 404
            theirs = await bob.patch(f"/api/conversations/{cid}", json={"secrets": []})
            assert theirs.status_code == 404
            # Bob's own TOKEN is his: it neither replaces nor reveals admin's.
            assert (await put_secret(bob, "TOKEN", "bobs-own-value")).status_code == 200
        assert [s["name"] for s in (await srv.client.get("/api/secrets")).json()] == ["TOKEN"]
        assert (await srv.services.secrets.exposure(cid)).env == {"TOKEN": VALUE}

        deleted = await srv.client.delete("/api/secrets/TOKEN")
        assert deleted.status_code == 204
        assert (await srv.client.get(f"/api/conversations/{cid}")).json()["secrets"] == []
        assert (await srv.client.delete("/api/secrets/TOKEN")).status_code == 404

    raw = database_bytes(tmp_path)
    assert VALUE.encode() not in raw and b"bobs-own-value" not in raw  # sealed at rest


def tool_output(events: list[dict[str, Any]], call_id: str) -> str:
    return "".join(
        e["data"]["text"]
        for e in events
        if e["type"] == "tool.output" and e["data"]["call_id"] == call_id
    )


def finished(events: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    [event] = [
        e for e in events if e["type"] == "tool.finished" and e["data"]["call_id"] == call_id
    ]
    data: dict[str, Any] = event["data"]
    return data


async def test_a_value_printed_byte_by_byte_is_masked_in_journal_and_model_requests(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            tool_call_reply([("bash", {"command": f'printf %s "$TOKEN" > kept.txt; {DRIP}'})]),
            text_reply("Printed it."),
            tool_call_reply([("bash", {"command": 'echo "token=${TOKEN:-unset}"; cat kept.txt'})]),
            text_reply("Gone now."),
        )
        provider = OpenAICompatProvider("fake-model", "sk-test-key-0000", fake.base_url)
        async with running_server(tmp_path, lambda: provider) as srv:
            assert (await put_secret(srv.client, "TOKEN", VALUE)).status_code == 200
            cid = await srv.create_conversation()
            assert (await choose(srv, cid, ["TOKEN"])).status_code == 200

            run = await srv.send(cid, f"print it; by the way it is {VALUE}")
            done = await srv.run_finished(cid, run["run_id"], timeout=60)
            assert done["data"]["status"] == "completed", done
            events = await srv.events(cid)
            live = tool_output(events, "call_0")
            # Joined, the live pieces would spell the value if a split one got through.
            assert VALUE not in live and live.count("****") == 2, live
            result = finished(events, "call_0")
            assert result["output"].splitlines() == ["****", f"****len={len(VALUE)}"], result
            page = (await srv.client.get(f"/api/conversations/{cid}/events?format=json")).text
            assert VALUE not in page and VALUE not in json.dumps(events)
            user = next(e for e in events if e["type"] == "user.message")
            assert user["data"]["content"] == "print it; by the way it is ****"
            second_request = json.dumps(fake.requests[1])
            assert VALUE not in second_request and "****" in second_request
            assert f"len={len(VALUE)}" in second_request  # the command really had the value

            # Deleted, it is unchosen: the next command runs without it, and the value it
            # left in a file stays masked.
            assert (await srv.client.delete("/api/secrets/TOKEN")).status_code == 204
            run = await srv.send(cid, "again")
            done = await srv.run_finished(cid, run["run_id"], timeout=60)
            assert done["data"]["status"] == "completed", done
            events = await srv.events(cid)
            outputs = [e["data"]["output"] for e in events if e["type"] == "tool.finished"]
            assert outputs[-1] == "token=unset\n****", outputs
            assert VALUE not in json.dumps(fake.requests)


async def test_another_conversation_without_the_secret_does_not_get_it(tmp_path: Path) -> None:
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            tool_call_reply([("bash", {"command": 'echo "token=${TOKEN:-unset}"'})]),
            text_reply("done"),
        )
        provider = OpenAICompatProvider("fake-model", "sk-test-key-0000", fake.base_url)
        async with running_server(tmp_path, lambda: provider) as srv:
            await put_secret(srv.client, "TOKEN", VALUE)
            with_it = await srv.create_conversation("with")
            await choose(srv, with_it, ["TOKEN"])
            without = await srv.create_conversation("without")
            run = await srv.send(without, "show")
            await srv.run_finished(without, run["run_id"], timeout=60)
            assert finished(await srv.events(without), "call_0")["output"] == "token=unset"


async def test_a_terminal_gets_the_secret_and_masks_it_live_and_in_scrollback(
    tmp_path: Path,
) -> None:
    async with running_server(tmp_path, None) as srv:
        await put_secret(srv.client, "TOKEN", VALUE)
        cid = await srv.create_conversation()
        await choose(srv, cid, ["TOKEN"])
        tid = await open_terminal(srv, cid)
        url, headers = ws_url(srv, cid, tid), session_cookie(srv.client)
        async with connect(url, additional_headers=headers) as ws:
            await ws.send(f"{DRIP}; echo DR''IP-END\n".encode())
            live = await read_until(ws, b"DRIP-END", timeout=20)
        assert VALUE.encode() not in live
        assert live.count(b"****") == 2, live
        assert f"len={len(VALUE)}".encode() in live
        async with connect(url, additional_headers=headers) as again:
            scrollback = await asyncio.wait_for(again.recv(), 10)
        assert isinstance(scrollback, bytes)
        assert VALUE.encode() not in scrollback and b"****" in scrollback

        # A terminal opened after the secret is unchosen does not have it.
        await choose(srv, cid, [])
        later = await open_terminal(srv, cid)
        async with connect(ws_url(srv, cid, later), additional_headers=headers) as ws:
            await ws.send(b'echo "token=${TOKEN:-un""set}"\n')
            assert b"token=unset" in await read_until(ws, b"token=unset", timeout=10)


async def test_the_system_prompt_reaches_the_model_masked(tmp_path: Path) -> None:
    """AGENTS.md and the workspace's skill descriptions join the system prompt straight from
    the sandbox, not through the journal: a command that wrote the secret into them must
    not have it sent to the provider. The whole request is masked on its way out."""
    write = (
        'printf "Deploy with %s\\n" "$TOKEN" > AGENTS.md; mkdir -p .burrow/skills/ship; '
        'printf -- "---\\nname: ship\\ndescription: Ship using %s\\n---\\nbody\\n" "$TOKEN" '
        "> .burrow/skills/ship/SKILL.md"
    )
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            tool_call_reply([("bash", {"command": write})]),
            text_reply("Wrote them."),
            text_reply("Read them."),
        )
        provider = OpenAICompatProvider("fake-model", "sk-test-key-0000", fake.base_url)
        async with running_server(tmp_path, lambda: provider) as srv:
            assert (await put_secret(srv.client, "TOKEN", VALUE)).status_code == 200
            cid = await srv.create_conversation()
            assert (await choose(srv, cid, ["TOKEN"])).status_code == 200
            for message in ("write the notes", "now follow them"):
                run = await srv.send(cid, message)
                done = await srv.run_finished(cid, run["run_id"], timeout=60)
                assert done["data"]["status"] == "completed", done
            sandbox = await srv.services.runtime.sandboxes.get(cid)
            assert VALUE.encode() in await sandbox.read_file("AGENTS.md")  # really written
        third = fake.requests[2]
        system = third["messages"][0]
        assert system["role"] == "system", system
        assert "Deploy with ****" in system["content"], system
        assert "Ship using ****" in system["content"], system
        assert VALUE not in json.dumps(fake.requests)
