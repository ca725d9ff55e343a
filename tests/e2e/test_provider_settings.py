"""The settings dialog tests an Anthropic key against the (fake) Messages API without saving
it, stores it on Save and never shows it back; and names other OpenAI-compatible servers."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.scripted import ScriptedProvider
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving
from tests.fakes import FakeOpenAIServer
from tests.fakes.anthropic_server import FakeAnthropicServer

KEY = "sk-ant-browser-0123456789abcd"


async def test_anthropic_key_is_tested_unsaved_then_saved_and_hidden(
    tmp_path: Path, page: Page
) -> None:
    with FakeAnthropicServer(api_key=KEY, models=["claude-test"]) as fake:
        async with serving(tmp_path, page, ScriptedProvider([])) as srv:
            await open_app(page, srv)
            await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
            dialog = page.get_by_role("dialog", name="Model")
            await dialog.get_by_label("Anthropic key").fill(KEY)
            await dialog.get_by_label("Anthropic endpoint").fill(fake.base_url)
            await dialog.get_by_role("button", name="Test the Anthropic key").click()
            # The first test imports the Anthropic SDK on the server: allow for a slow machine.
            await expect(dialog.get_by_role("status")).to_have_text(
                "✓ anthropic: the key works; 1 model offered.", timeout=20_000
            )
            await shot(page, "13-anthropic-settings")
            # A test never saves: Cancel leaves no key behind.
            await dialog.get_by_role("button", name="Cancel").click()
            [_, anthropic] = (await srv.client.get("/api/settings/providers")).json()
            assert anthropic["api_key_set"] is False and anthropic["base_url"] is None
            await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
            await dialog.get_by_label("Anthropic key").fill(KEY)
            await dialog.get_by_label("Anthropic endpoint").fill(fake.base_url)
            await dialog.get_by_label("Model name").fill("anthropic:claude-test")
            await dialog.get_by_role("button", name="Save").click()
            await expect(dialog).to_have_count(0)
            assert (await srv.client.get("/api/health")).json()["model"] == "anthropic:claude-test"

            await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
            key = page.get_by_role("dialog", name="Model").get_by_label("Anthropic key")
            await expect(key).to_have_value("")  # never shown back
            placeholder = await key.get_attribute("placeholder") or ""
            assert placeholder == "set (…abcd) — type to replace"


GPU_KEY = "sk-gpu-box-browser-0123456789"


async def test_a_named_model_server_is_tested_added_offered_and_removed(
    tmp_path: Path, page: Page
) -> None:
    with FakeOpenAIServer(api_key=GPU_KEY, models={"qwen-coder"}) as fake:
        async with serving(tmp_path, page, ScriptedProvider([])) as srv:
            made = await srv.client.post("/api/conversations", json={"title": "t"})
            cid = made.json()["id"]
            await open_app(page, srv, f"/c/{cid}")
            await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
            section = page.get_by_role("region", name="Model servers")
            await expect(section.get_by_text("No other model servers.")).to_be_visible()
            await section.get_by_role("button", name="Add a model server…").click()
            await section.get_by_label("Server name").fill("gpu-box")
            await section.get_by_label("Server kind").select_option("vllm")
            await expect(section.get_by_label("Server address")).to_have_value(
                "http://localhost:8000/v1"
            )  # the preset's address, filled in
            await section.get_by_label("Server address").fill(fake.base_url)
            await section.get_by_label("Server key").fill("sk-wrong")
            await section.get_by_role("button", name="Test the server").click()
            status = section.get_by_role("status")
            await expect(status).to_contain_text("✗", timeout=20_000)
            await expect(status).to_contain_text("401")
            assert "sk-wrong" not in (await status.inner_text())
            await section.get_by_label("Server key").fill(GPU_KEY)
            await section.get_by_role("button", name="Test the server").click()
            await expect(status).to_have_text("✓ gpu-box: the key works; 1 model offered.")
            ids = [p["id"] for p in (await srv.client.get("/api/settings/providers")).json()]
            assert ids == ["openai", "anthropic"]  # a test never saves
            await section.get_by_role("button", name="Add the server").click()
            listed = section.get_by_role("list", name="Model servers")
            await expect(listed).to_contain_text("gpu-box")
            await expect(listed).to_contain_text("vllm")
            await expect(listed).to_contain_text("key …6789")
            await shot(page, "14-model-servers")
            await (
                page.get_by_role("dialog", name="Model")
                .get_by_role("button", name="Cancel")
                .click()
            )

            # Its model is offered in the header's menu, named by its server.
            await page.reload()
            select = page.get_by_label("Model", exact=True)
            option = select.locator("option", has_text="qwen-coder · gpu-box")
            await expect(option).to_have_count(1, timeout=10_000)
            await select.select_option("gpu-box:qwen-coder")
            await expect(page.locator(".notice", has_text="from the next run")).to_be_visible()
            chosen = (await srv.client.get(f"/api/conversations/{cid}")).json()["model"]
            assert chosen == "gpu-box:qwen-coder"

            await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
            await section.get_by_role("button", name="Remove").click()
            await expect(section.get_by_text("No other model servers.")).to_be_visible()
            await expect(section.get_by_role("status")).to_contain_text("Removed gpu-box")
