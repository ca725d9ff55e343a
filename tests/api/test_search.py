"""GET /api/search: the caller's own conversations only, and bad queries refused."""

from __future__ import annotations

from pathlib import Path

import httpx

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import log_in, running_server


async def test_search_finds_only_the_callers_own_words(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [ScriptedTurn(text="The zebra stripes are done."), ScriptedTurn(text="Ok.")]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation("Animals")
        run = await srv.send(cid, "paint zebra stripes at 100% opacity")
        await srv.run_finished(cid, run["run_id"])
        created = await srv.client.post(
            "/api/users", json={"username": "bob", "password": "bob-password-1"}
        )
        assert created.status_code == 201, created.text

        hits = (await srv.client.get("/api/search", params={"q": "ZEBRA"})).json()
        assert [(h["conversation_id"], h["kind"]) for h in hits] == [
            (cid, "assistant"),
            (cid, "user"),
        ]
        assert hits[0]["snippet"] == "The zebra stripes are done."
        assert hits[0]["title"] == "Animals" and hits[0]["seq"] > hits[1]["seq"]
        literal = await srv.client.get("/api/search", params={"q": "100%"})
        assert [h["kind"] for h in literal.json()] == ["user"]
        wildcard = await srv.client.get("/api/search", params={"q": "1_0%"})
        assert wildcard.json() == []

        async with httpx.AsyncClient(base_url=srv.base_url, timeout=10) as bob:
            await log_in(bob, "bob", "bob-password-1")
            for q in ("zebra", "Animals", "%", "_"):
                response = await bob.get("/api/search", params={"q": q})
                assert response.status_code == 200 and response.json() == [], q
        async with httpx.AsyncClient(base_url=srv.base_url, timeout=10) as anonymous:
            stranger = await anonymous.get("/api/search", params={"q": "zebra"})
            assert stranger.status_code == 401


async def test_bad_queries_are_refused_precisely(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        for params, code in (
            ({"q": "x" * 201}, "query_too_long"),
            ({"q": "x" * 20_000}, "query_too_long"),
            ({"q": "   "}, "empty_query"),
            ({}, "empty_query"),
        ):
            response = await srv.client.get("/api/search", params=params)
            assert response.status_code == 400, response.text
            assert response.json()["error"]["code"] == code
        too_many = await srv.client.get("/api/search", params={"q": "x", "limit": 1000})
        assert too_many.status_code == 422
        assert too_many.json()["error"]["code"] == "invalid_request"
