"""Model settings from the settings page: stored encrypted, never shown back, used by runs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.api.harness import running_server
from tests.fakes import FakeOpenAIServer, text_reply

KEY = "sk-burrow-test-0123456789abcd"


async def test_a_key_set_in_settings_is_encrypted_masked_and_used(tmp_path: Path) -> None:
    with FakeOpenAIServer() as fake:
        fake.enqueue(text_reply("Hello from the fake model."))
        async with running_server(tmp_path, None) as srv:
            before = (await srv.client.get("/api/settings/model")).json()
            assert before["configured"] is False
            assert (await srv.client.get("/api/health")).json()["model"] is None

            put = await srv.client.put(
                "/api/settings/model",
                json={"model": "fake-model", "base_url": fake.base_url, "api_key": KEY},
            )
            assert put.status_code == 200, put.text
            view = put.json()
            assert view == {
                "model": "fake-model",
                "base_url": fake.base_url,
                "api_key_set": True,
                "api_key_hint": "…abcd",
                "configured": True,
                "source": "the settings page",
                "saved_model": "fake-model",
            }
            assert KEY not in put.text

        raw = (tmp_path / "burrow.db").read_bytes()
        assert KEY.encode() not in raw  # encrypted at rest

        async with running_server(tmp_path, None) as srv:  # a restart keeps the settings
            cid = await srv.create_conversation()
            run = await srv.send(cid, "hi")
            finished = await srv.run_finished(cid, run["run_id"])
            assert finished["data"]["status"] == "completed", finished
            assert fake.headers[-1]["authorization"] == f"Bearer {KEY}"
            events = await srv.client.get(f"/api/conversations/{cid}/events?format=json")
            assert KEY not in events.text
            assert "Hello from the fake model." in events.text


async def test_the_process_model_wins_over_the_saved_one_and_the_default_loses_to_it(
    tmp_path: Path,
) -> None:
    """Precedence: a conversation's model, its profile's, then --model / BURROW_MODEL, then the
    settings page, then BURROW_DEFAULT_MODEL (`make run`'s demo)."""
    with FakeOpenAIServer() as fake:
        async with running_server(tmp_path, None, default_model="demo") as srv:
            view = (await srv.client.get("/api/settings/model")).json()
            assert (view["model"], view["source"]) == ("demo", "BURROW_DEFAULT_MODEL")
            assert srv.services.models.banner() == "Model: demo (from BURROW_DEFAULT_MODEL)"
            await srv.client.put(
                "/api/settings/model",
                json={"model": "fake-model", "base_url": fake.base_url, "api_key": KEY},
            )
            view = (await srv.client.get("/api/settings/model")).json()
            assert (view["model"], view["source"]) == ("fake-model", "the settings page")

        async with running_server(tmp_path, None, model="demo", model_source="--model") as srv:
            view = (await srv.client.get("/api/settings/model")).json()
            assert (view["model"], view["source"], view["saved_model"]) == (
                "demo",
                "--model",
                "fake-model",
            )
            assert (await srv.client.get("/api/health")).json()["model"] == "demo"
            assert srv.services.models.banner() == (
                "Model: demo (from --model); the settings page's fake-model is not used while "
                "it is set"
            )
            cid = await srv.create_conversation()
            run = await srv.send(cid, "hi")
            finished = await srv.run_finished(cid, run["run_id"], timeout=120)
            assert finished["data"]["status"] == "completed", finished
            assert fake.requests == []  # the demo ran, not the saved model

            # A conversation's own model still wins over the process's.
            made = await srv.client.post("/api/conversations", json={"model": "fake-model"})
            assert made.status_code == 201, made.text
            chosen = made.json()["id"]
            fake.enqueue(text_reply("the saved server"))
            run = await srv.send(chosen, "hi")
            finished = await srv.run_finished(chosen, run["run_id"])
            assert finished["data"]["status"] == "completed", finished
            assert len(fake.requests) == 1


async def test_bad_settings_are_rejected(tmp_path: Path) -> None:
    async with running_server(tmp_path, None) as srv:
        bad = await srv.client.put("/api/settings/model", json={"base_url": "ftp://x"})
        assert bad.status_code == 422
        assert "http://" in bad.json()["error"]["message"]


async def test_without_a_model_a_run_fails_with_what_to_set(tmp_path: Path) -> None:
    async with running_server(tmp_path, None) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "hi")
        finished = await srv.run_finished(cid, run["run_id"])
        assert finished["data"]["status"] == "failed"
        assert finished["data"]["error"].startswith("No model configured: set OPENAI_API_KEY")


async def test_a_key_the_model_repeats_is_redacted_from_the_journal_and_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeOpenAIServer() as fake:
        fake.enqueue(text_reply(f"Your key is {KEY}, right?"))
        async with running_server(tmp_path, None) as srv:
            await srv.client.put(
                "/api/settings/model",
                json={"model": "fake-model", "base_url": fake.base_url, "api_key": KEY},
            )
            cid = await srv.create_conversation()
            run = await srv.send(cid, "what is my key?")
            await srv.run_finished(cid, run["run_id"])
            page = (await srv.client.get(f"/api/conversations/{cid}/events?format=json")).text
            assert KEY not in page
            assert "Your key is [redacted], right?" in page
            with caplog.at_level(logging.INFO):
                logging.getLogger("burrow.test").warning("leaking %s", KEY)
            assert KEY not in caplog.text and "[redacted]" in caplog.text
