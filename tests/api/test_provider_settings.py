"""Provider settings (DESIGN §8): a key and base URL per provider, stored encrypted, tested
against the provider, and the model list."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.api.harness import free_port, log_in, running_server
from tests.fakes import FakeOpenAIServer
from tests.fakes.anthropic_server import FakeAnthropicServer, message, text
from tests.fakes.served import served

KEY = "sk-ant-settings-0123456789wxyz"


async def test_anthropic_key_is_stored_encrypted_tested_and_used(tmp_path: Path) -> None:
    with FakeAnthropicServer(api_key=KEY, models=["claude-test", "claude-other"]) as fake:
        async with running_server(tmp_path, None) as srv:
            put = await srv.client.put(
                "/api/settings/providers/anthropic",
                json={"api_key": KEY, "base_url": fake.base_url},
            )
            assert put.status_code == 200, put.text
            assert put.json() == {
                "id": "anthropic",
                "provider": "anthropic",
                "kind": "anthropic",
                "base_url": fake.base_url,
                "preset": None,
                "api_key_set": True,
                "api_key_hint": "…wxyz",
                "capabilities": {
                    "stream_tools": True,
                    "tool_format": "native",
                    "context_window": None,
                },
            }
            tested = await srv.client.post("/api/settings/providers/anthropic/test", json={})
            assert tested.json() == {
                "ok": True,
                "detail": "anthropic: the key works; 2 models offered.",
                "models": ["claude-test", "claude-other"],
            }
            chosen = await srv.client.put(
                "/api/settings/model", json={"model": "anthropic:claude-haiku-4-5"}
            )
            assert chosen.json()["configured"] is True
            models = (await srv.client.get("/api/settings/models")).json()
            assert models[0] == {
                "id": "anthropic:claude-haiku-4-5",
                "provider": "anthropic",
                "context_window": 200_000,
                "vision": True,
                "server_model": True,
            }
            assert {m["id"].split(":")[0] for m in models} == {"anthropic"}  # no OpenAI key
        assert KEY.encode() not in (tmp_path / "burrow.db").read_bytes()

        fake.enqueue(message([text("Hello from Claude.")]))
        async with running_server(tmp_path, None) as srv:  # a restart keeps the key
            cid = await srv.create_conversation()
            run = await srv.send(cid, "hi")
            finished = await srv.run_finished(cid, run["run_id"])
            assert finished["data"]["status"] == "completed", finished
            assert fake.requests[-1]["model"] == "claude-haiku-4-5"
            page = await srv.client.get(f"/api/conversations/{cid}/events?format=json")
            assert "Hello from Claude." in page.text and KEY not in page.text


async def test_a_bad_key_fails_the_test_with_what_to_do(tmp_path: Path) -> None:
    with FakeAnthropicServer(api_key="sk-ant-the-right-key") as fake:
        async with running_server(tmp_path, None) as srv:
            await srv.client.put(
                "/api/settings/providers/anthropic",
                json={"api_key": "sk-ant-a-wrong-key", "base_url": fake.base_url},
            )
            tested = await srv.client.post("/api/settings/providers/anthropic/test", json={})
    assert tested.json() == {
        "ok": False,
        # The key was saved from the settings page: its field is named, not a variable.
        "detail": f"The Anthropic API at {fake.base_url} rejected the API key (invalid x-api-key):"
        " check the API key in Settings (copy it again from the Anthropic console).",
        "models": None,
    }


async def test_a_test_of_unsaved_values_never_saves_and_no_key_follows_a_new_url(
    tmp_path: Path,
) -> None:
    with (
        FakeAnthropicServer(api_key=KEY) as stored,
        FakeAnthropicServer(api_key="sk-ant-the-other-key", models=["claude-b"]) as other,
    ):
        async with running_server(tmp_path, None) as srv:
            await srv.client.put(
                "/api/settings/providers/anthropic",
                json={"api_key": KEY, "base_url": stored.base_url},
            )
            test = "/api/settings/providers/anthropic/test"
            wrong = (await srv.client.post(test, json={"api_key": "sk-ant-a-wrong-key"})).json()
            assert wrong["ok"] is False and "rejected the API key" in wrong["detail"]
            assert "check the API key in Settings" in wrong["detail"]  # the key typed there
            assert "ANTHROPIC_API_KEY" not in wrong["detail"]
            assert "sk-ant-a-wrong-key" not in wrong["detail"]
            # The stored key is not sent to a URL it was not stored for.
            moved = (await srv.client.post(test, json={"base_url": other.base_url})).json()
            assert moved == {
                "ok": False,
                "detail": "No API key for anthropic: set one here or ANTHROPIC_API_KEY.",
                "models": None,
            }
            both = {"base_url": other.base_url, "api_key": "sk-ant-the-other-key"}
            works = (await srv.client.post(test, json=both)).json()
            assert works["ok"] is True and works["models"] == ["claude-b"]
            bad_url = await srv.client.post(test, json={"base_url": "file:///etc/passwd"})
            assert bad_url.status_code == 422
            # A key goes in a header: one that cannot be sent is refused, not a 500.
            bad_key = await srv.client.post(test, json={"api_key": "sk-\ub6db"})
            assert bad_key.status_code == 422
            # Nothing of that was saved: the stored key and URL still work.
            [_, anthropic] = (await srv.client.get("/api/settings/providers")).json()
            assert anthropic["base_url"] == stored.base_url
            assert anthropic["api_key_hint"] == "…wxyz"
            assert (await srv.client.post(test, json={})).json()["ok"] is True


async def test_without_a_key_the_test_says_where_to_set_one(tmp_path: Path) -> None:
    async with running_server(tmp_path, None) as srv:
        tested = await srv.client.post("/api/settings/providers/anthropic/test", json={})
        assert tested.json()["ok"] is False
        assert tested.json()["detail"] == (
            "No API key for anthropic: set one here or ANTHROPIC_API_KEY."
        )
        unknown = await srv.client.put("/api/settings/providers/cohere", json={"api_key": "x"})
        assert unknown.status_code == 422


async def test_openai_provider_is_the_model_settings_key(tmp_path: Path) -> None:
    with FakeOpenAIServer(api_key="sk-openai-0123456789") as fake:
        async with running_server(tmp_path, None) as srv:
            put = await srv.client.put(
                "/api/settings/providers/openai",
                json={"api_key": "sk-openai-0123456789", "base_url": fake.base_url},
            )
            assert put.json()["api_key_hint"] == "…6789"
            view = (await srv.client.get("/api/settings/model")).json()
            assert view["api_key_set"] is True and view["base_url"] == fake.base_url
            tested = await srv.client.post("/api/settings/providers/openai/test", json={})
            assert tested.json()["ok"] is True
            assert tested.json()["models"] == ["fake-model"]
            # Another server at the base URL: its own models, not OpenAI's list.
            assert (await srv.client.get("/api/settings/models")).json() == []
            await srv.client.put("/api/settings/model", json={"model": "fake-model"})
            [listed] = (await srv.client.get("/api/settings/models")).json()
            assert listed == {
                "id": "openai:fake-model",
                "provider": "openai",
                "context_window": 128_000,
                "vision": False,
                "server_model": True,
            }
            await srv.client.put("/api/settings/providers/openai", json={"base_url": ""})
            models = (await srv.client.get("/api/settings/models")).json()
            assert "openai:gpt-4o" in [m["id"] for m in models]  # api.openai.com: the table


async def test_only_an_administrator_sets_or_probes_a_provider(tmp_path: Path) -> None:
    # A probe makes the server call the stored base URL: a user who could set it could
    # point the server at any address it reaches, with the operator's key.
    with FakeAnthropicServer(api_key=KEY) as fake:
        async with running_server(tmp_path, None) as srv:
            await srv.client.put(
                "/api/settings/providers/anthropic",
                json={"api_key": KEY, "base_url": fake.base_url},
            )
            made = await srv.client.post(
                "/api/users", json={"username": "mallory", "password": "mallory-pw-1"}
            )
            assert made.status_code == 201, made.text
            async with httpx.AsyncClient(base_url=srv.base_url) as mallory:
                await log_in(mallory, "mallory", "mallory-pw-1")
                for method, path, body in [
                    ("PUT", "/api/settings/providers/anthropic", {"base_url": "http://10.0.0.1"}),
                    ("PUT", "/api/settings/providers/openai", {"api_key": "sk-mine"}),
                    ("POST", "/api/settings/providers/anthropic/test", {}),
                ]:
                    response = await mallory.request(method, path, json=body)
                    assert response.status_code == 403, (path, response.text)
                    assert response.json()["error"]["code"] == "forbidden"
                # Reading is allowed, and never shows the key.
                listed = await mallory.get("/api/settings/providers")
                assert listed.status_code == 200 and KEY not in listed.text
            assert len(fake.requests) == 0  # no probe reached the provider
            [anthropic] = [
                p
                for p in (await srv.client.get("/api/settings/providers")).json()
                if p["provider"] == "anthropic"
            ]
            assert anthropic["base_url"] == fake.base_url  # unchanged

            for body, says in [
                ({"api_key": "x" * 1001}, "api_key: String should have at most 1000"),
                ({"base_url": "file:///etc/passwd"}, "base_url must start with http://"),
                ({"base_url": "http://" + "a" * 2000}, "base_url: String should have at most"),
            ]:
                bad = await srv.client.put("/api/settings/providers/anthropic", json=body)
                assert bad.status_code == 422, bad.text
                assert bad.json()["error"]["message"].startswith(says), bad.text


ENV_KEY = "sk-operator-env-key-0123456789"
STORED_KEY = "sk-stored-for-the-first-server-42"


@contextlib.asynccontextmanager
async def key_catcher() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """A server on 127.0.0.1 that a web administrator might point a base URL at: it lists
    one model to anyone (OpenAI's and Anthropic's shapes at once), refuses every other
    request with 401, and records the headers of every request."""
    seen: list[dict[str, str]] = []

    async def anything(request: Request) -> Response:
        seen.append(dict(request.headers))
        if request.method == "GET" and request.url.path.endswith("/models"):
            model = {"id": "caught", "object": "model", "type": "model", "created": 0,
                     "owned_by": "me", "display_name": "caught",
                     "created_at": "2026-01-01T00:00:00Z"}  # fmt: skip
            page = {"object": "list", "data": [model], "has_more": False,
                    "first_id": "caught", "last_id": "caught"}  # fmt: skip
            return JSONResponse(page)
        error = {"message": "no key", "type": "invalid_request_error", "code": "invalid_api_key"}
        return JSONResponse({"error": error}, 401)

    port = free_port()
    app = Starlette(routes=[Route("/{path:path}", anything, methods=["GET", "POST"])])
    async with served(app, port):
        yield f"http://127.0.0.1:{port}/v1", seen


def _keys_in(seen: list[dict[str, str]]) -> str:
    return json.dumps(seen)


async def test_a_changed_base_url_never_gets_the_environments_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_API_KEY / ANTHROPIC_API_KEY are the operator's: pointing the base URL at
    another server from the settings page (and pressing Test, or running) sends no key
    there, and the test says why; BURROW_PROVIDER_ENV_KEY_ANY_URL=true lets it go."""
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY + "-ant")
    async with key_catcher() as (url, seen):
        async with running_server(tmp_path, None) as srv:
            for provider in ("openai", "anthropic"):
                put = await srv.client.put(
                    f"/api/settings/providers/{provider}", json={"base_url": url}
                )
                assert put.status_code == 200 and put.json()["api_key_set"] is False, put.text
            tested = (await srv.client.post("/api/settings/providers/openai/test", json={})).json()
            assert f"the base URL changed: enter the key for {url}" in tested["detail"], tested
            assert "BURROW_PROVIDER_ENV_KEY_ANY_URL" in tested["detail"]
            assert tested["ok"] is True and tested["models"] == ["caught"]  # asked keyless
            tested = (
                await srv.client.post("/api/settings/providers/anthropic/test", json={})
            ).json()
            assert tested["ok"] is False, tested
            assert f"the base URL changed: enter the key for {url}" in tested["detail"]
            # A run goes to the new URL without the key too.
            await srv.client.put("/api/settings/model", json={"model": "caught"})
            cid = await srv.create_conversation()
            run = await srv.send(cid, "hi")
            finished = await srv.run_finished(cid, run["run_id"], timeout=60)
            assert finished["data"]["status"] == "failed"
            assert len(seen) >= 2  # the test and the run did reach it
            assert ENV_KEY not in _keys_in(seen)

            # Back at the operator's URL the key is used again.
            await srv.client.put("/api/settings/providers/openai", json={"base_url": ""})
            assert (await srv.client.get("/api/settings/model")).json()["api_key_set"] is True

        seen.clear()
        async with running_server(tmp_path, None, provider_env_key_any_url=True) as srv:
            await srv.client.put("/api/settings/providers/openai", json={"base_url": url})
            tested = (await srv.client.post("/api/settings/providers/openai/test", json={})).json()
            assert tested["detail"] == "openai: the key works; 1 model offered.", tested
            assert seen[-1]["authorization"] == f"Bearer {ENV_KEY}"  # the operator allowed it


async def test_a_changed_base_url_drops_the_stored_key(tmp_path: Path) -> None:
    """A key saved for one server is not sent to the next one a web administrator names:
    changing the base URL drops it (a key given with the new URL is kept)."""
    async with key_catcher() as (url, seen):
        with FakeOpenAIServer(api_key=STORED_KEY) as first:
            async with running_server(tmp_path, None) as srv:
                put = await srv.client.put(
                    "/api/settings/providers/openai",
                    json={"api_key": STORED_KEY, "base_url": first.base_url},
                )
                assert put.json()["api_key_set"] is True
                tested = await srv.client.post("/api/settings/providers/openai/test", json={})
                assert tested.json()["ok"] is True  # the first server gets its key

                moved = await srv.client.put(
                    "/api/settings/providers/openai", json={"base_url": url}
                )
                assert moved.json()["api_key_set"] is False, moved.text
                tested = (
                    await srv.client.post("/api/settings/providers/openai/test", json={})
                ).json()
                assert f"the base URL changed: enter the key for {url}" in tested["detail"]
                # Anthropic's stored key too; its test asks nothing without a key.
                await srv.client.put(
                    "/api/settings/providers/anthropic",
                    json={"api_key": KEY, "base_url": first.base_url},
                )
                await srv.client.put("/api/settings/providers/anthropic", json={"base_url": url})
                tested = (
                    await srv.client.post("/api/settings/providers/anthropic/test", json={})
                ).json()
                assert tested["ok"] is False
                assert f"the base URL changed: enter the key for {url}" in tested["detail"]
                assert STORED_KEY not in _keys_in(seen) and KEY not in _keys_in(seen)

            async with running_server(tmp_path, None) as srv:  # dropped for good
                view = (await srv.client.get("/api/settings/model")).json()
                assert view["base_url"] == url and view["api_key_set"] is False
                # A key given with a new URL is the key for that URL.
                put = await srv.client.put(
                    "/api/settings/providers/openai",
                    json={"api_key": STORED_KEY, "base_url": first.base_url},
                )
                assert put.json()["api_key_set"] is True
                tested = await srv.client.post("/api/settings/providers/openai/test", json={})
                assert tested.json()["ok"] is True, tested.text
        assert STORED_KEY.encode() not in (tmp_path / "burrow.db").read_bytes()


async def test_a_preset_names_the_servers_kind_and_only_known_ones_are_taken(
    tmp_path: Path,
) -> None:
    async with running_server(tmp_path, None) as srv:
        put = await srv.client.put(
            "/api/settings/providers/openai",
            json={"base_url": "http://127.0.0.1:11434/v1", "preset": "ollama"},
        )
        assert put.status_code == 200, put.text
        assert put.json()["preset"] == "ollama" and put.json()["kind"] == "openai_compatible"
        assert put.json()["capabilities"] == {
            "stream_tools": None,  # no tool turn seen yet
            "tool_format": None,
            "context_window": None,
        }
        bad = await srv.client.put("/api/settings/providers/openai", json={"preset": "docker"})
        assert bad.status_code == 422
        cleared = await srv.client.put(
            "/api/settings/providers/openai", json={"preset": "", "base_url": ""}
        )
        assert cleared.json()["preset"] is None and cleared.json()["kind"] == "openai"
