"""Several OpenAI-compatible servers, each named by an administrator (DESIGN §9): a model is
`<id>:<model>`, each server gets only its own key, and what a server showed of itself is
kept with the settings across a restart."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from burrow.llm import server_traits
from tests.api.harness import RunningServer, log_in, running_server
from tests.fakes import FakeOpenAIServer
from tests.fakes.openai_server import text_reply

GPU_KEY = "sk-gpu-box-0123456789abcd"


def _saved_traits(data_dir: Path) -> str | None:
    with sqlite3.connect(data_dir / "burrow.db") as db:
        row = db.execute("SELECT value FROM settings WHERE name = 'model.server_traits'").fetchone()
    return row[0] if row else None


async def _models(srv: RunningServer, want: set[str]) -> list[dict[str, Any]]:
    """The model list once it holds `want` (named servers are listed in the background)."""
    for _ in range(100):
        listed: list[dict[str, Any]] = (await srv.client.get("/api/settings/models")).json()
        if want <= {m["id"] for m in listed}:
            return listed
        await asyncio.sleep(0.05)
    raise AssertionError(f"{want} never listed: {listed}")


async def test_each_named_server_gets_its_own_models_and_only_its_own_key(
    tmp_path: Path,
) -> None:
    with (
        FakeOpenAIServer(models={"llama3.2:8b"}) as ollama,
        FakeOpenAIServer(api_key=GPU_KEY, models={"qwen-coder"}) as gpu,
    ):
        async with running_server(tmp_path, None) as srv:
            made = await srv.client.put(
                "/api/settings/providers/ollama",
                json={"base_url": ollama.base_url, "preset": "ollama"},
            )
            assert made.status_code == 200, made.text
            assert made.json()["kind"] == "openai_compatible"
            assert made.json()["preset"] == "ollama" and made.json()["api_key_set"] is False
            # A test of an unsaved server never saves it.
            tested = await srv.client.post(
                "/api/settings/providers/gpu-box/test",
                json={"base_url": gpu.base_url, "api_key": GPU_KEY},
            )
            assert tested.json()["ok"] is True and tested.json()["models"] == ["qwen-coder"]
            ids = [p["id"] for p in (await srv.client.get("/api/settings/providers")).json()]
            assert ids == ["openai", "anthropic", "ollama"]
            put = await srv.client.put(
                "/api/settings/providers/gpu-box",
                json={"base_url": gpu.base_url, "api_key": GPU_KEY, "preset": "vllm"},
            )
            assert put.json()["api_key_hint"] == "…abcd"
            listed = await srv.client.get("/api/settings/providers")
            assert [p["id"] for p in listed.json()] == ["openai", "anthropic", "gpu-box", "ollama"]
            assert GPU_KEY not in listed.text

            models = await _models(srv, {"ollama:llama3.2:8b", "gpu-box:qwen-coder"})
            assert not any(m["server_model"] for m in models)  # none chosen for the server

            ollama.enqueue(text_reply("From the laptop."))
            gpu.enqueue(text_reply("From the GPU box."))
            for model, fake, says in [
                ("ollama:llama3.2:8b", ollama, "From the laptop."),
                ("gpu-box:qwen-coder", gpu, "From the GPU box."),
            ]:
                made = await srv.client.post(
                    "/api/conversations", json={"title": model, "model": model}
                )
                assert made.status_code == 201, made.text
                cid = made.json()["id"]
                run = await srv.send(cid, "hi")
                finished = await srv.run_finished(cid, run["run_id"])
                assert finished["data"]["status"] == "completed", finished
                assert fake.requests[-1]["model"] == model.split(":", 1)[1]
                page = await srv.client.get(f"/api/conversations/{cid}/events?format=json")
                assert says in page.text
            assert [h.get("authorization") for h in gpu.headers] == [f"Bearer {GPU_KEY}"]
            assert all(GPU_KEY not in str(h) for h in ollama.headers)  # never the other's key

            # The server's model may be a named server's, and is listed first.
            await srv.client.put("/api/settings/model", json={"model": "gpu-box:qwen-coder"})
            first = (await srv.client.get("/api/settings/models")).json()[0]
            assert first["id"] == "gpu-box:qwen-coder" and first["server_model"] is True
            assert first["provider"] == "gpu-box"

        assert GPU_KEY.encode() not in (tmp_path / "burrow.db").read_bytes()
        async with running_server(tmp_path, None) as srv:  # a restart keeps both
            ids = [p["id"] for p in (await srv.client.get("/api/settings/providers")).json()]
            assert ids == ["openai", "anthropic", "gpu-box", "ollama"]
            gpu.enqueue(text_reply("Still the GPU box."))
            cid = await srv.create_conversation()
            run = await srv.send(cid, "hi")  # the server's model: gpu-box:qwen-coder
            finished = await srv.run_finished(cid, run["run_id"])
            assert finished["data"]["status"] == "completed", finished
            assert gpu.headers[-1]["authorization"] == f"Bearer {GPU_KEY}"


async def test_a_removed_server_is_said_so_and_no_other_server_gets_its_models(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer(models={"m"}) as fake, FakeOpenAIServer() as openai_like:
        async with running_server(tmp_path, None) as srv:
            # The openai provider points elsewhere: a removed server's model must not go there.
            await srv.client.put(
                "/api/settings/providers/openai", json={"base_url": openai_like.base_url}
            )
            await srv.client.put("/api/settings/providers/local", json={"base_url": fake.base_url})
            made = await srv.client.post("/api/conversations", json={"model": "local:m"})
            cid = made.json()["id"]
            gone = await srv.client.delete("/api/settings/providers/local")
            assert gone.status_code == 204, gone.text
            sent = await srv.client.post(
                f"/api/conversations/{cid}/messages", json={"content": "hi"}
            )
            assert sent.status_code == 202, sent.text  # the run ends with what to do
            finished = await srv.run_finished(cid, sent.json()["run_id"])
            assert finished["data"]["status"] == "failed", finished
            assert "local was removed in Settings" in str(finished), finished
            chosen = await srv.client.post("/api/conversations", json={"model": "local:m"})
            assert chosen.status_code == 400, chosen.text
            assert "local was removed in Settings" in chosen.json()["error"]["message"]
            assert openai_like.requests == [] and fake.requests == []

            again = await srv.client.delete("/api/settings/providers/local")
            assert again.status_code == 404
            assert again.json()["error"]["code"] == "provider_not_found"
            builtin = await srv.client.delete("/api/settings/providers/openai")
            assert builtin.status_code == 409
            # Named again, it is a server again.
            back = await srv.client.put(
                "/api/settings/providers/local", json={"base_url": fake.base_url}
            )
            assert back.status_code == 200
            assert (
                await srv.client.post("/api/conversations", json={"model": "local:m"})
            ).status_code == 201


async def test_names_and_bodies_that_are_refused(tmp_path: Path) -> None:
    async with running_server(tmp_path, None) as srv:
        for name, body, code, says in [
            ("demo", {"base_url": "http://127.0.0.1:1/v1"}, 422, "demo is a name Burrow uses"),
            ("scripted", {"base_url": "http://127.0.0.1:1/v1"}, 422, "scripted is a name"),
            ("Ollama", {"base_url": "http://127.0.0.1:1/v1"}, 422, ""),
            ("a" * 33, {"base_url": "http://127.0.0.1:1/v1"}, 422, ""),
            ("ollama", {"api_key": "k"}, 422, "The server ollama needs a base URL"),
            ("ollama", {"base_url": "file:///etc/passwd"}, 422, "base_url must start"),
            ("anthropic", {"preset": "ollama"}, 422, "A preset names"),
        ]:
            put = await srv.client.put(f"/api/settings/providers/{name}", json=body)
            assert put.status_code == code, (name, put.text)
            assert put.json()["error"]["message"].startswith(says), put.text
        untested = await srv.client.post("/api/settings/providers/nobody/test", json={})
        assert untested.status_code == 404
        ids = [p["id"] for p in (await srv.client.get("/api/settings/providers")).json()]
        assert ids == ["openai", "anthropic"]  # nothing was made

        await srv.client.put(
            "/api/settings/providers/ollama", json={"base_url": "http://127.0.0.1:1/v1"}
        )
        made = await srv.client.post(
            "/api/users", json={"username": "mallory", "password": "mallory-pw-1"}
        )
        assert made.status_code == 201
        async with httpx.AsyncClient(base_url=srv.base_url) as mallory:
            await log_in(mallory, "mallory", "mallory-pw-1")
            for method, path in [
                ("PUT", "/api/settings/providers/evil"),
                ("PUT", "/api/settings/providers/ollama"),
                ("DELETE", "/api/settings/providers/ollama"),
                ("POST", "/api/settings/providers/ollama/test"),
            ]:
                response = await mallory.request(
                    method, path, json={"base_url": "http://10.0.0.1/v1"}
                )
                assert response.status_code == 403, (path, response.text)
            listed = await mallory.get("/api/settings/providers")  # reading is allowed
            assert [p["id"] for p in listed.json()] == ["openai", "anthropic", "ollama"]


async def test_what_a_server_showed_of_itself_survives_a_restart(tmp_path: Path) -> None:
    """A server that refused a streamed tool turn is not asked streamed again after a
    restart: what was seen is kept with the settings (the detection itself is tested in
    tests/llm/test_openai_compat*.py; here, that it is kept)."""
    url = "http://127.0.0.1:9/v1"
    async with running_server(tmp_path, None) as srv:
        await srv.client.put(
            "/api/settings/providers/llamacpp", json={"base_url": url, "preset": "llamacpp"}
        )
        server_traits.saw(url, stream_tools=False, tool_format="native", escapes_html=True)
        for _ in range(100):  # saved in the background
            if _saved_traits(tmp_path):
                break
            await asyncio.sleep(0.02)
    server_traits.SEEN.clear()  # as a new process starts
    async with running_server(tmp_path, None) as srv:
        [named] = [
            p
            for p in (await srv.client.get("/api/settings/providers")).json()
            if p["id"] == "llamacpp"
        ]
        assert named["capabilities"]["stream_tools"] is False
        assert named["capabilities"]["tool_format"] == "native"
    # and the provider reads them: unstreamed tool turns, escapes undone (test_local_servers.py)
    assert server_traits.traits(url) == server_traits.Traits(False, "native", True, False)


async def test_a_named_servers_key_does_not_follow_a_new_url(tmp_path: Path) -> None:
    """An administrator account pointing `gpu-box` at a server of its own gets no key there:
    the stored key was meant for the first URL, and the test says so."""
    with FakeOpenAIServer(api_key=GPU_KEY) as real, FakeOpenAIServer() as catcher:
        async with running_server(tmp_path, None) as srv:
            await srv.client.put(
                "/api/settings/providers/gpu-box",
                json={"base_url": real.base_url, "api_key": GPU_KEY},
            )
            moved = await srv.client.put(
                "/api/settings/providers/gpu-box", json={"base_url": catcher.base_url}
            )
            assert moved.json()["api_key_set"] is False
            tested = await srv.client.post("/api/settings/providers/gpu-box/test", json={})
            assert tested.json()["detail"].startswith(
                "No API key was used: the base URL changed: enter the key for"
            ), tested.text
            catcher.enqueue(text_reply("caught"))
            made = await srv.client.post("/api/conversations", json={"model": "gpu-box:m"})
            cid = made.json()["id"]
            run = await srv.send(cid, "hi")
            await srv.run_finished(cid, run["run_id"])
            assert catcher.requests, "the run went to the new URL"
            assert all(GPU_KEY not in str(h) for h in catcher.headers)
