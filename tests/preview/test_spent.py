"""The memory of used link nonces: a replay is caught, it forgets only expired links, when
full it refuses rather than forgetting a live one, and one user cannot fill it for all."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from burrow.preview import proxy
from burrow.preview.spent import SpentLinks, TooManyLinks
from tests.api.harness import log_in, running_server

FLOOD = 200


def test_a_nonce_is_spent_once() -> None:
    spent = SpentLinks()
    assert spent.spend("a", expires=200, now=100)
    assert not spent.spend("a", expires=200, now=150)
    assert spent.spend("b", expires=200, now=150)


def test_expired_links_are_forgotten_and_the_memory_stays_bounded() -> None:
    spent = SpentLinks(capacity=3)
    for index in range(3):
        assert spent.spend(f"n{index}", expires=100 + index, now=50)
    with pytest.raises(TooManyLinks):
        spent.spend("n3", expires=200, now=99)  # all three still live: none may be dropped
    assert not spent.spend("n0", expires=100, now=99)
    assert spent.spend("n3", expires=200, now=101)  # n0 and n1 have expired
    assert len(spent) == 2
    for now in range(200, 1200):  # a steady stream of links never grows it
        assert spent.spend(f"m{now}", expires=now + 2, now=now)
    assert len(spent) <= 3


def test_one_user_fills_only_their_share() -> None:
    spent = SpentLinks(capacity=1000, share=10)
    for index in range(10):
        assert spent.spend(f"m{index}", expires=200, now=100, user="mallory")
    with pytest.raises(TooManyLinks) as full:
        spent.spend("m10", expires=200, now=100, user="mallory")
    assert not full.value.everyone
    assert spent.spend("a0", expires=400, now=100, user="alice")  # others still get in
    assert spent.spend("m10", expires=300, now=201, user="mallory")  # her links expired
    assert len(spent) == 2
    assert SpentLinks().share == 1_000  # a hundred users to fill the default memory


async def test_a_flood_of_links_from_one_user_leaves_the_others_their_previews(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real server whose memory is small enough to fill in a test (100,000 by default;
    # one user measured 52 links/s): the same SpentLinks, only fewer slots.
    monkeypatch.setattr(proxy, "SpentLinks", lambda: SpentLinks(capacity=FLOOD))
    async with running_server(tmp_path / "data", None, preview=True) as server:
        victim_cid = await server.create_conversation("alice's")
        made = await server.client.post(
            "/api/users", json={"username": "mallory", "password": "mallory-password"}
        )
        assert made.status_code == 201, made.text
        base = f"http://127.0.0.1:{server.preview_port}"
        async with (
            httpx.AsyncClient(base_url=server.base_url, timeout=30) as mallory,
            httpx.AsyncClient(base_url=base, timeout=30) as previews,
        ):
            await log_in(mallory, "mallory", "mallory-password")
            cid = (await mallory.post("/api/conversations", json={})).json()["id"]

            async def use_a_link(client: httpx.AsyncClient, cid: str, port: int) -> int:
                opened = await client.get(f"/api/conversations/{cid}/previews/{port}/open")
                assert opened.status_code == 303, opened.text
                url = httpx.URL(opened.headers["location"])
                host = url.netloc.decode()
                return (
                    await previews.get(url.raw_path.decode(), headers={"host": host})
                ).status_code

            # Links for any port, used as fast as she can: more than the whole memory.
            answers = [await use_a_link(mallory, cid, 1 + n) for n in range(FLOOD + 5)]
            assert answers[0] == 303
            # Then Alice opens her preview.
            assert await use_a_link(server.client, victim_cid, 5173) == 303
            # Mallory was stopped at her share, with an answer that says so.
            assert answers.count(303) < FLOOD // 2 and answers[-1] == 429
