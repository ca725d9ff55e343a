"""Secrets in a real browser: the settings page sets, lists and deletes them without ever
showing a value; a conversation chooses them; an egress sandbox holding them is warned about."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving
from tests.e2e.tour import eventually

VALUE = "sk-live-Browser-Secret-7731"


async def test_settings_set_list_delete_and_the_egress_warning(tmp_path: Path, page: Page) -> None:
    # Conversations without network (the default is egress): no warning for them.
    async with serving(tmp_path, page, ScriptedProvider([]), sandbox_network="none") as srv:
        await open_app(page, srv)
        await page.get_by_role("button", name=re.compile("Settings")).click()
        dialog = page.get_by_role("dialog")
        await expect(dialog.get_by_text("No secrets yet.")).to_be_visible()

        await dialog.get_by_label("Name", exact=True).fill("PATH")
        await dialog.get_by_label("Value", exact=True).fill(VALUE)
        await dialog.get_by_role("button", name="Set secret").click()
        await expect(dialog.get_by_role("alert")).to_contain_text("reserved")

        await dialog.get_by_label("Name", exact=True).fill("DEPLOY_TOKEN")
        await dialog.get_by_label("Value", exact=True).fill(VALUE)
        await dialog.get_by_role("button", name="Set secret").click()
        listed = dialog.get_by_role("list", name="Your secrets")
        await expect(listed.get_by_text("DEPLOY_TOKEN")).to_be_visible()
        await expect(dialog.get_by_label("Value", exact=True)).to_have_value("")
        await dialog.get_by_label("Name", exact=True).fill("OTHER_KEY")
        await dialog.get_by_label("Value", exact=True).fill("another-value-1234")
        await dialog.get_by_role("button", name="Set secret").click()
        await expect(listed.get_by_role("listitem")).to_have_count(2)
        assert VALUE not in await page.content()
        await shot(page, "secrets-settings")

        await dialog.get_by_role("button", name="Delete OTHER_KEY").click()
        await expect(listed.get_by_role("listitem")).to_have_count(1)
        names = (await srv.client.get("/api/secrets")).json()
        assert [s["name"] for s in names] == ["DEPLOY_TOKEN"]
        await dialog.get_by_role("button", name="Cancel").click()

        # Without egress, choosing it warns of nothing.
        cid = await srv.create_conversation("with a secret")
        await page.goto(f"{srv.base_url.replace('127.0.0.1', 'localhost')}/c/{cid}")
        await page.get_by_text("Secrets", exact=True).click()
        await (
            page.get_by_role("group", name="Secrets for this conversation")
            .get_by_label("DEPLOY_TOKEN")
            .check()
        )
        await expect(page.get_by_text("Secrets · 1")).to_be_visible()

        async def chosen() -> bool:  # the UI counts the choice before its PATCH lands
            conversation = (await srv.client.get(f"/api/conversations/{cid}")).json()
            return bool(conversation["secrets"] == ["DEPLOY_TOKEN"])

        await eventually(chosen, "the conversation's chosen secrets are stored")
        await expect(page.locator(".secrets-warning")).to_have_count(0)
        assert VALUE not in await page.content()


async def test_a_conversation_with_secrets_and_open_egress_is_warned_about(
    tmp_path: Path, page: Page
) -> None:
    provider = ScriptedProvider([])
    # The warning reads the conversation's network policy; the sandbox never starts here.
    async with running_server(tmp_path, lambda: provider, sandbox_network="egress") as srv:
        await srv.client.put("/api/secrets/DEPLOY_TOKEN", json={"value": VALUE})
        cid = await srv.create_conversation("egress")
        await open_app(page, srv, f"/c/{cid}")
        await expect(page.locator(".secrets-warning")).to_have_count(0)  # none chosen yet
        await page.get_by_text("Secrets", exact=True).click()
        await page.get_by_label("DEPLOY_TOKEN").check()
        warning = page.get_by_role("alert").filter(has_text="can reach any internet host")
        await expect(warning).to_be_visible()
        await expect(warning).to_contain_text("DEPLOY_TOKEN")
        await shot(page, "secrets-egress-warning")
        await page.get_by_label("DEPLOY_TOKEN").uncheck()
        await expect(warning).to_have_count(0)
        await page.context.close()  # its event stream open would keep the server up
