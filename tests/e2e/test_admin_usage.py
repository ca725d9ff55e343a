"""The admin's usage page after a run: tokens and cost per account, the time split."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.e2e.test_workspace import open_app, serving


async def test_the_admin_sees_usage_per_account_and_where_run_time_went(
    tmp_path: Path, page: Page
) -> None:
    turns = [ScriptedTurn(text="Listing.", tool_calls=[("bash", {"command": "ls"})]),
             ScriptedTurn(text="Done.")]  # fmt: skip
    async with serving(tmp_path, page, ScriptedProvider(turns, turn_from_context=True)) as srv:
        cid = await srv.create_conversation()
        await srv.run_finished(cid, (await srv.send(cid, "list"))["run_id"])
        made = await srv.client.post(
            "/api/users", json={"username": "bob", "password": "bob-pw-12"}
        )
        assert made.status_code == 201
        await open_app(page, srv)
        await page.get_by_role("button", name=re.compile("Settings")).click()
        usage = page.get_by_role("dialog").get_by_role("region", name="Usage")
        table = usage.get_by_role("table", name="Usage by account")
        admin = table.get_by_role("row").filter(has_text="admin")
        await expect(admin).to_contain_text("1")  # one conversation
        tokens = await admin.get_by_role("cell").nth(2).inner_text()
        assert int(tokens.replace(",", "")) > 0
        await expect(table.get_by_role("row").filter(has_text="bob")).to_contain_text("$0.0000")
        since = usage.get_by_test_id("usage-since-start")
        await expect(since).to_contain_text("1 completed")
        await expect(since).to_contain_text(re.compile(r"in runs: model [\d.]+ s, tools [\d.]+ s"))

        # The run itself says where its time went.
        await open_app(page, srv, f"/c/{cid}")
        end = page.locator(".run-end").last
        await expect(end).to_contain_text(re.compile(r"model [\d.]+ (ms|s), tools [\d.]+ (ms|s)"))
        await expect(end).to_contain_text("Burrow")


async def test_a_user_who_is_not_an_administrator_sees_the_model_but_no_form(
    tmp_path: Path, page: Page
) -> None:
    async with serving(tmp_path, page, ScriptedProvider([ScriptedTurn(text="Hi.")])) as srv:
        made = await srv.client.post(
            "/api/users", json={"username": "bob", "password": "bob-pw-12"}
        )
        assert made.status_code == 201
        base = srv.base_url.replace("127.0.0.1", "localhost")
        login = {"username": "bob", "password": "bob-pw-12"}
        assert (await page.request.post(f"{base}/api/auth/login", data=login)).ok
        await page.goto(base + "/")
        await page.get_by_role("button", name=re.compile("Settings")).click()
        dialog = page.get_by_role("dialog")
        await expect(dialog.get_by_role("note").first).to_contain_text(
            "Only an administrator can change it."
        )
        # Nothing to fill in that the server would refuse on Save.
        await expect(dialog.get_by_label("Model name")).to_have_count(0)
        await expect(dialog.get_by_role("button", name="Save")).to_have_count(0)
        await expect(dialog.get_by_role("button", name="Use the demo model")).to_have_count(0)
        await dialog.get_by_role("button", name="Close").click()
        await expect(dialog).to_be_hidden()
