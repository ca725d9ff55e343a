"""Profiles through the real server: per-user and shared, chosen at creation and switched
between runs; a tool allowlist narrows what is offered and refuses the rest; explicit
fields win over the profile's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, running_server
from tests.api.test_secrets import second_user


async def put(client: httpx.AsyncClient, name: str, **body: Any) -> httpx.Response:
    return await client.put(f"/api/profiles/{name}", json=body)


async def create(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await client.post("/api/conversations", json=body)


async def finish(srv: RunningServer, cid: str, content: str) -> dict[str, Any]:
    run = await srv.send(cid, content)
    finished: dict[str, Any] = (await srv.run_finished(cid, run["run_id"]))["data"]
    return finished


async def test_a_profile_narrows_the_tools_and_refuses_a_disallowed_call(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=[
                    ("bash", {"command": "echo pwned > bash.txt"}),
                    ("write_file", {"path": "review.md", "content": "ok"}),
                ]
            ),
            ScriptedTurn(text="Reviewed."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        response = await put(
            srv.client,
            "reviewer",
            system_prompt="You review code and write review.md.",
            tools=["read_file", "write_*"],  # a name, and a pattern
        )
        assert response.status_code == 200, response.text
        created = await create(srv.client, profile="reviewer")
        assert created.status_code == 201 and created.json()["profile"] == "reviewer"
        cid = created.json()["id"]
        finished = await finish(srv, cid, "review")
        events = await srv.events(cid)
        listing = await srv.client.get(f"/api/conversations/{cid}/files", params={"path": "."})

    assert finished["status"] == "completed"
    # Offered: only the allowed tools; told: the profile's system prompt.
    assert {spec.name for spec in provider.tool_requests[0]} == {"read_file", "write_file"}
    assert provider.requests[0][0].content == "You review code and write review.md."
    bash, write = [e["data"] for e in events if e["type"] == "tool.finished"]
    assert bash["is_error"]
    assert "profile 'reviewer' does not allow the tool 'bash'" in bash["output"]
    assert not write["is_error"]
    names = {entry["name"] for entry in listing.json()}
    assert "review.md" in names and "bash.txt" not in names
    # Refused before the gate: nobody was asked about it.
    assert not [e for e in events if e["type"] == "approval.requested"]


async def test_explicit_fields_win_over_the_profile(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "From the server's script."}] * 5))
    async with running_server(tmp_path / "data", None, model=f"scripted:{script}") as srv:
        response = await put(srv.client, "careful", approval_mode="read_only", model="demo")
        assert response.status_code == 200, response.text
        assert (await put(srv.client, "bold", approval_mode="auto")).status_code == 200

        by_profile = (await create(srv.client, profile="careful")).json()
        explicit = (
            await create(
                srv.client, profile="careful", approval_mode="ask", model=f"scripted:{script}"
            )
        ).json()
        assert by_profile["approval_mode"] == "read_only" and by_profile["model"] is None
        assert explicit["approval_mode"] == "ask"

        # The profile's model when the conversation chose none; its own when it did.
        await finish(srv, by_profile["id"], "hello")
        await finish(srv, explicit["id"], "hello")
        texts = {}
        for conversation in (by_profile, explicit):
            events = await srv.events(conversation["id"])
            texts[conversation["id"]] = [
                e["data"]["content"] for e in events if e["type"] == "assistant.message"
            ][-1]
        assert texts[explicit["id"]] == "From the server's script."
        assert texts[by_profile["id"]] != "From the server's script."

        # Switching between runs: the new profile's mode, unless the PATCH sets one.
        cid = by_profile["id"]
        switched = await srv.client.patch(f"/api/conversations/{cid}", json={"profile": "bold"})
        assert switched.status_code == 200
        assert switched.json()["profile"] == "bold" and switched.json()["approval_mode"] == "auto"
        both = await srv.client.patch(
            f"/api/conversations/{cid}", json={"profile": "careful", "approval_mode": "ask"}
        )
        assert both.json()["approval_mode"] == "ask" and both.json()["profile"] == "careful"
        back = await srv.client.patch(f"/api/conversations/{cid}", json={"profile": "default"})
        assert back.json()["profile"] == "default"


async def test_unknown_and_other_users_profiles(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        assert (await put(srv.client, "mine", tools=["read_file"])).status_code == 200
        assert (await put(srv.client, "team", shared=True, tools=["bash"])).status_code == 200
        unknown = await create(srv.client, profile="nope")
        assert unknown.status_code == 400
        assert unknown.json()["error"]["code"] == "unknown_profile"
        cid = (await create(srv.client)).json()["id"]
        patched = await srv.client.patch(f"/api/conversations/{cid}", json={"profile": "nope"})
        assert patched.status_code == 400
        assert (await srv.client.get("/api/profiles/nope")).status_code == 404

        async with second_user(srv, "bob") as bob:
            # Another user's profile is invisible: not listed, not readable, not usable.
            assert [p["name"] for p in (await bob.get("/api/profiles")).json()] == ["team"]
            assert (await bob.get("/api/profiles/mine")).status_code == 404
            assert (await create(bob, profile="mine")).status_code == 400
            assert (await bob.delete("/api/profiles/mine")).status_code == 404
            # A shared profile: everyone sees it, only administrators write it.
            assert (await bob.get("/api/profiles/team")).json()["shared"] is True
            assert (await put(bob, "team", shared=True)).status_code == 403
            assert (await bob.delete("/api/profiles/team?shared=true")).status_code == 403
            # Bob's own profile of that name shadows the shared one, for Bob only.
            assert (await put(bob, "team", tools=["read_file"])).status_code == 200
            mine = (await bob.get("/api/profiles/team")).json()
            assert mine["shared"] is False and mine["tools"] == ["read_file"]
            assert (await bob.get("/api/profiles/team?shared=true")).json()["tools"] == ["bash"]
            assert (await srv.client.get("/api/profiles/team")).json()["tools"] == ["bash"]
            assert len((await bob.get("/api/profiles")).json()) == 2
        assert (await srv.client.get("/api/profiles/team")).json()["shared"] is True


async def test_bad_profile_input_is_refused(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        assert (await put(srv.client, "default")).status_code == 400
        assert (await put(srv.client, "x", system_prompt="y" * 40_000)).status_code == 422
        assert (await put(srv.client, "x", tools=["t"] * 201)).status_code == 422
        assert (await put(srv.client, "x", approval_mode="yolo")).status_code == 422
        assert (await put(srv.client, "x", model="scripted:/etc/passwd")).status_code == 400
        assert (await srv.client.put("/api/profiles/..%2Fx", json={})).status_code in (
            404,
            405,
            422,
        )
        assert (await put(srv.client, "a" * 101)).status_code in (404, 422)
        foreign = await srv.client.put(
            "/api/profiles/x", json={}, headers={"Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        for i in range(100):
            assert (await put(srv.client, f"p{i}")).status_code == 200
        too_many = await put(srv.client, "p100")
        assert too_many.status_code == 400
        assert too_many.json()["error"]["code"] == "too_many_profiles"
        assert (await put(srv.client, "p5", system_prompt="replaced")).status_code == 200


async def test_a_deleted_profile_fails_the_next_run_with_what_to_do(tmp_path: Path) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Hi.")] * 3)
    async with running_server(tmp_path, lambda: provider) as srv:
        assert (await put(srv.client, "gone", tools=["read_file"])).status_code == 200
        cid = (await create(srv.client, profile="gone")).json()["id"]
        assert (await srv.client.delete("/api/profiles/gone")).status_code == 204
        finished = await finish(srv, cid, "hello")

    assert finished["status"] == "failed"
    assert "profile 'gone'" in finished["error"] and "PATCH profile" in finished["error"]
    assert provider.requests == []
