"""A repository in and out through the browser: a new conversation from the sidebar's form,
the clone's progress in the timeline, then a branch pushed and a pull request opened from
the Changes tab (the git server in its own network namespace, a fake GitHub API)."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.scripted import ScriptedProvider
from tests.api.test_git import PASSWORD, GitRemote, git_remote, sh, shell  # noqa: F401
from tests.api.test_secrets import put_secret
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving
from tests.fakes.github_server import FakeGitHub


async def test_clone_from_the_sidebar_then_push_and_open_a_pull_request(
    tmp_path: Path,
    page: Page,
    git_remote: GitRemote,  # noqa: F811
) -> None:
    with FakeGitHub() as github:
        async with serving(
            tmp_path,
            page,
            ScriptedProvider([]),
            sandbox_network="egress",
            github_api_url=github.url,
        ) as srv:
            await put_secret(srv.client, "GIT_TOKEN", PASSWORD)
            await put_secret(srv.client, "GH_TOKEN", "ghp_e2e-token-value")
            await open_app(page, srv)
            await page.get_by_text("From a git repository…").click()
            await page.get_by_label("Repository URL").fill(git_remote.url)
            await page.get_by_label("Ref").fill("main")
            await page.get_by_label("Credential secret").select_option("GIT_TOKEN")
            await page.get_by_role("button", name="Clone into a new conversation").click()
            await expect(page.get_by_text(re.compile(r"^Imported: Cloned"))).to_be_visible(
                timeout=60_000
            )
            await shot(page, "git-1-imported")
            cid = page.url.rsplit("/", 1)[-1]
            await shell(srv, cid, "echo 'from the browser' > UI.md")

            await page.get_by_role("tab", name="Changes").click()
            await page.get_by_text("Push a branch / open a pull request").click()
            await page.get_by_label("Branch", exact=True).fill("burrow/ui")
            await page.get_by_label("Credential", exact=True).select_option("GIT_TOKEN")
            await page.get_by_role("button", name="Commit & push").click()
            await expect(page.locator(".git-out").get_by_role("status")).to_contain_text(
                "Pushed burrow/ui"
            )
            shown = sh("git", "--git-dir", str(git_remote.bare), "show", "burrow/ui:UI.md")
            assert shown == "from the browser\n"

            await page.get_by_label("Pull request title").fill("From the browser")
            await page.get_by_label("GitHub token").select_option("GH_TOKEN")
            await page.get_by_role("button", name="Open pull request").click()
            await expect(page.locator(".git-out").get_by_role("status")).to_contain_text(
                "Pull request #1 opened."
            )
            await shot(page, "git-2-pull-request")
            [pull] = github.pulls
            assert pull["body"]["head"] == "burrow/ui" and pull["body"]["base"] == "main"
            assert pull["body"]["title"] == "From the browser"
