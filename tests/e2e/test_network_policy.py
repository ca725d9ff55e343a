"""A conversation's network policy in the browser: shown and changed in the header, the
allowlist named, and the secrets warning following the policy."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.scripted import ScriptedProvider
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving


async def test_the_header_shows_and_changes_the_policy(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, ScriptedProvider([])) as srv:
        await srv.client.put("/api/secrets/DEPLOY_TOKEN", json={"value": "v-123456789"})
        cid = await srv.create_conversation("network")
        await srv.client.patch(
            f"/api/conversations/{cid}", json={"secrets": ["DEPLOY_TOKEN"], "network": "none"}
        )
        await open_app(page, srv, f"/c/{cid}")
        select = page.get_by_label("Network", exact=True)
        await expect(select).to_have_value("none")
        # The sandbox status area names the policy (the panel's, or the header's when closed).
        status = page.locator(".sandbox-state, .header-meta[title=Sandbox]").first
        await expect(status).to_contain_text("· no network")
        await expect(page.locator(".secrets-warning")).to_have_count(0)

        await select.select_option("egress")
        await expect(select).to_have_value("egress")
        await expect(select.locator("option[value=egress]")).to_have_text("Network: egress")
        await expect(status).to_contain_text("· egress")
        conversation = (await srv.client.get(f"/api/conversations/{cid}")).json()
        assert conversation["network"] == "egress"
        # Secrets and egress to anywhere: the user is told.
        warning = page.get_by_role("alert").filter(has_text="can reach any internet host")
        await expect(warning).to_be_visible()
        await shot(page, "network-egress-with-secret")
        await select.select_option("none")
        await expect(warning).to_have_count(0)
        assert (await srv.client.get(f"/api/conversations/{cid}")).json()["network"] == "none"


async def test_an_allowlist_is_named_and_silences_the_warning(tmp_path: Path, page: Page) -> None:
    async with serving(
        tmp_path, page, ScriptedProvider([]), sandbox_allow_domains="registry.npmjs.org"
    ) as srv:
        await srv.client.put("/api/secrets/DEPLOY_TOKEN", json={"value": "v-123456789"})
        cid = await srv.create_conversation("allowlist")
        await srv.client.patch(f"/api/conversations/{cid}", json={"secrets": ["DEPLOY_TOKEN"]})
        await open_app(page, srv, f"/c/{cid}")
        select = page.get_by_label("Network", exact=True)
        await expect(select).to_have_value("egress")
        await expect(select.locator("option[value=egress]")).to_have_text(
            "Network: egress + allowlist"
        )
        status = page.locator(".sandbox-state, .header-meta[title=Sandbox]").first
        await expect(status).to_contain_text("· egress + allowlist")
        # Its tooltip names what is reachable.
        await expect(select).to_have_attribute("title", re.compile("registry.npmjs.org"))
        await expect(page.locator(".secrets-warning")).to_have_count(0)
