"""The first run, as a new user meets it: a fresh data directory, no key. The empty
screen is the "connect a model" flow; a wrong key shows the server's own refusal and saves
nothing; the right one lists the server's models, Connect saves, and the first message
reaches that server. The server is a fake OpenAI-compatible one on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from tests.api.harness import running_server
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app
from tests.fakes import FakeOpenAIServer, text_reply

KEY = "sk-local-0123456789"


async def test_a_first_run_connects_a_local_server_and_a_wrong_key_shows_its_refusal(
    tmp_path: Path, page: Page
) -> None:
    with FakeOpenAIServer(api_key=KEY, models={"local-coder"}) as fake:
        fake.enqueue(text_reply("Hello from the local model."))
        async with running_server(tmp_path, None) as srv:  # the model the settings choose
            try:
                await open_app(page, srv)
                flow = page.get_by_role("region", name="Connect a model")
                await expect(flow).to_be_visible()
                await shot(page, "11-connect-a-model")

                await flow.get_by_label("Provider").select_option(label="llama.cpp server")
                url = flow.get_by_label("Base URL")
                await expect(url).to_have_value("http://localhost:8080/v1")  # the preset's
                await url.fill(fake.base_url)
                key = flow.get_by_label("API key (optional)")
                await key.fill("sk-wrong-key-000")
                await flow.get_by_role("button", name="Test", exact=True).click()
                refusal = flow.get_by_role("alert")
                await expect(refusal).to_contain_text("401: Incorrect API key provided.")
                await expect(refusal).to_contain_text("check the API key in Settings")
                await expect(flow.get_by_role("button", name="Connect")).to_be_disabled()
                await shot(page, "12-connect-wrong-key")
                saved = (await srv.client.get("/api/settings/model")).json()
                assert saved["api_key_set"] is False and saved["base_url"] is None  # never saved

                await key.fill(KEY)
                await flow.get_by_role("button", name="Test", exact=True).click()
                await expect(flow.get_by_role("status")).to_have_text(
                    "✓ openai: the key works; 1 model offered."
                )
                await expect(flow.get_by_role("combobox", name="Model", exact=True)).to_have_value(
                    "local-coder"
                )
                await shot(page, "13-connect-tested")
                await flow.get_by_role("button", name="Connect").click()
                await expect(flow).to_have_count(0)
                await expect(page.locator(".model-name")).to_have_text("local-coder")

                composer = page.get_by_label("Message")
                await composer.fill("Say hello")
                await composer.press("Enter")
                await expect(page.get_by_text("Hello from the local model.")).to_be_visible()
                await shot(page, "14-connected-first-answer")
                assert fake.requests[-1]["model"] == "local-coder"
                assert fake.requests[-1]["messages"][-1]["content"] == "Say hello"
                [openai, _] = (await srv.client.get("/api/settings/providers")).json()
                assert openai["preset"] == "llamacpp" and openai["kind"] == "openai_compatible"
                assert openai["base_url"] == fake.base_url and openai["api_key_set"] is True
            finally:
                await page.context.close()


async def test_the_demo_model_says_what_it_is(tmp_path: Path, page: Page) -> None:
    async with running_server(tmp_path, None) as srv:
        try:
            await open_app(page, srv)
            flow = page.get_by_role("region", name="Connect a model")
            await flow.get_by_role("button", name="Use the offline demo instead").click()
            await expect(flow).to_have_count(0)
            notice = page.get_by_role("note")
            await expect(notice).to_contain_text("You are using the offline demo model")
            await notice.get_by_role("button", name="Connect a real model…").click()
            await expect(page.get_by_role("dialog", name="Model")).to_be_visible()
        finally:
            await page.context.close()
