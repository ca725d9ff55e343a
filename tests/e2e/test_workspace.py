"""The workspace in a real browser against a real server with a scripted model.

Each state a person would look at is saved as a screenshot under artifacts/e2e/.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.tools.registry import default_tools
from tests.api.harness import ADMIN_PASSWORD, RunningServer, running_server
from tests.conftest import unavailable
from tests.e2e.conftest import ARTIFACTS, shot

PAGE = "<h1>Hello from Burrow</h1>\n"
TICKS = "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick $i; sleep 0.3; done"


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path,
    page: Page,
    provider: ScriptedProvider,
    *,
    preview: bool = False,
    **settings: Any,
) -> AsyncIterator[RunningServer]:
    """A server for `page`; the page's streams are closed first so the server can stop."""
    async with running_server(tmp_path, lambda: provider, preview=preview, **settings) as srv:
        try:
            yield srv
        finally:
            await page.context.close()


async def open_app(page: Page, srv: RunningServer, path: str = "/", *, form: bool = False) -> None:
    """Load the app signed in: through the sign-in form, or by a login request beforehand.

    Opened as localhost, as a person would: the app and its *.preview.localhost previews
    are then one site, so the preview's SameSite=Lax cookie works inside the iframe.
    """
    base = srv.base_url.replace("127.0.0.1", "localhost")
    if not form:
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        assert (await page.request.post(f"{base}/api/auth/login", data=login)).ok
    await page.goto(base + path)
    if form:
        password = page.get_by_label("Password")
        await password.fill(ADMIN_PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("navigation", name="Conversations")).to_be_visible()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def paths(srv: RunningServer) -> set[str]:
    return set(srv.app.openapi()["paths"]) if srv.app is not None else set()


async def test_stream_tool_card_reload_mid_run_and_files(tmp_path: Path, page: Page) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                thinking="A page first, then a slow check.",
                text="I'll write **the page** first.",
                tool_calls=[("write_file", {"path": "site/index.html", "content": PAGE})],
            ),
            ScriptedTurn(text="Now a slow check.", tool_calls=[("bash", {"command": TICKS})]),
            ScriptedTurn(text="All done: the page is in `site/index.html`."),
        ],
        chunk_delay=0.03,
    )
    async with serving(tmp_path, page, provider) as srv:
        await open_app(page, srv, form=True)
        composer = page.get_by_label("Message")
        await composer.fill("Build me a page")
        await composer.press("Enter")
        await expect(page).to_have_url(re.compile(r"/c/[^/]+$"))
        await page.get_by_role("tab", name="Files").click()  # refreshes itself as tools write

        # Streamed markdown, then a live tool card with output arriving.
        await expect(page.locator(".assistant .markdown strong").first).to_have_text("the page")
        running = page.locator('.tool-card[data-state="running"]')
        await expect(running).to_contain_text("tick 2")
        await expect(page.locator(".pill[data-status=running]")).to_be_visible()
        await expect(page.get_by_role("tree").get_by_role("button", name="site")).to_be_visible()
        await shot(page, "1-live-tool-card")

        # Reload mid-run: the replay renders the same rows, then the run continues live.
        await expect(running).to_contain_text("tick 3")
        before = await page.locator(".timeline .row").all_inner_texts()
        await page.reload()
        await expect(page.locator(".tool-card")).to_have_count(2)
        await expect(page.locator('.tool-card[data-state="running"]')).to_contain_text("tick")
        await shot(page, "2-reloaded-mid-run")
        after = await page.locator(".timeline .row").all_inner_texts()
        assert after[: len(before) - 1] == before[:-1]  # all but the still-growing card

        finished = page.locator(".tool-card", has_text="tick 10")
        await expect(finished).to_have_attribute("data-state", "ok")
        await expect(finished).to_contain_text("exit 0")
        await expect(page.locator(".run-end")).to_contain_text("Done")
        await expect(page.locator(".row-user")).to_have_count(1)
        await expect(page.locator(".pill[data-status=idle]")).to_be_visible()
        await shot(page, "3-run-finished")

        # The written file, in the Files tab that was open all along.
        await expect(page.get_by_role("tab", name="Files")).to_have_attribute(
            "aria-selected", "true"
        )
        tree = page.get_by_role("tree")
        await tree.get_by_role("button", name="site").click()
        await tree.get_by_role("button", name=re.compile(r"^index\.html")).click()
        await expect(page.locator(".viewer pre.code")).to_contain_text("Hello from Burrow")
        await expect(page.get_by_role("link", name="Download")).to_be_visible()
        await shot(page, "4-files")


async def test_steer_then_stop_the_run(tmp_path: Path, page: Page) -> None:
    provider = ScriptedProvider(
        [ScriptedTurn(text="Sleeping.", tool_calls=[("bash", {"command": "sleep 30"})])]
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("stop me")
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("sleep")
        await page.get_by_role("button", name="Send", exact=True).click()
        await expect(page.locator('.tool-card[data-state="running"]')).to_be_visible()
        steer = page.get_by_label("Steer the running agent")
        await steer.fill("also add a README")
        await steer.press("Enter")
        steering = page.locator(".row-user", has_text="also add a README")
        await expect(steering.locator(".badge")).to_have_text("steering")
        await page.get_by_role("button", name="Stop", exact=True).click()
        # The run ends canceled; the server may then answer the queued steering message.
        await expect(page.locator(".run-end").first).to_contain_text("Stopped")
        await expect(page.locator(".tool-card").first).to_have_attribute("data-state", "error")
        await shot(page, "5-stopped")


async def test_terminal_runs_echo(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, ScriptedProvider([])) as srv:
        if "/api/conversations/{cid}/terminals" not in paths(srv):
            unavailable("the terminal endpoint")
        cid = await srv.create_conversation("terminal")
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_role("tab", name="Terminal").click()
        # The first shell waits for the sandbox: on a busy CI machine that took over 5 s
        # (the panel says "Opening a terminal…" meanwhile).
        await expect(page.locator(".terminal-view[data-link=open]")).to_be_visible(timeout=20_000)
        await expect(page.get_by_text("No terminal open.")).to_have_count(0)
        await page.locator(".xterm").click()
        await page.keyboard.type("echo hi\n")
        output_line = page.locator(".xterm-rows > div", has_text=re.compile(r"^\s*hi\s*$"))
        await expect(output_line.first).to_be_visible()
        await shot(page, "6-terminal")

        # A second shell, then back: the first one's scrollback comes back on reattach.
        await page.get_by_role("button", name="New terminal").click()
        await expect(page.get_by_role("tab", name="Shell 2")).to_have_attribute(
            "aria-selected", "true"
        )
        await expect(page.locator(".terminal-view[data-link=open]")).to_be_visible()
        await expect(output_line).to_have_count(0)
        await page.get_by_role("tab", name="Shell 1").click()
        await expect(page.locator(".xterm-rows")).to_contain_text("echo hi")
        await expect(output_line.first).to_be_visible()


async def test_preview_shows_the_app_the_agent_started(tmp_path: Path, page: Page) -> None:
    if "preview" not in default_tools():
        unavailable("the preview tool")
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("write_file", {"path": "site/index.html", "content": PAGE})]),
            ScriptedTurn(
                text="Starting it.",
                tool_calls=[
                    ("preview", {"command": "python3 -m http.server 8000 -d site", "port": 8000})
                ],
            ),
            ScriptedTurn(text="It is running in the preview."),
        ]
    )
    async with serving(tmp_path, page, provider, preview=True) as srv:
        cid = await srv.create_conversation("preview")
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("serve it")
        await page.get_by_label("Message").press("Enter")
        await srv.wait_for(cid, lambda e: e["type"] == "preview.opened", timeout=30)
        await expect(page.get_by_role("tab", name="Preview")).to_have_attribute(
            "aria-selected", "true"
        )
        heading = page.frame_locator(".preview iframe").locator("h1")
        await expect(heading).to_have_text("Hello from Burrow", timeout=20_000)
        await shot(page, "7-preview")

        # "Open" in a new tab: a top-level visit with a fresh signed link.
        async with page.context.expect_page() as popup_info:
            await page.locator(".preview").get_by_role("link", name="Open ↗").click()
        popup = await popup_info.value
        await expect(popup.locator("h1")).to_have_text("Hello from Burrow")
        await popup.screenshot(path=str(ARTIFACTS / "7-preview-new-tab.png"))


async def test_approval_card_allows_a_dangerous_call(tmp_path: Path, page: Page) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                text="Cleaning up.",
                tool_calls=[("bash", {"command": "mkdir -p b && rm -rf b && echo cleaned"})],
            ),
            ScriptedTurn(text="Clean."),
        ]
    )
    async with serving(tmp_path, page, provider) as srv:
        if "/api/conversations/{cid}/approvals/{request_id}" not in paths(srv):
            unavailable("the approvals endpoint")
        cid = await srv.create_conversation("approval")
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("clean the build")
        await page.get_by_label("Message").press("Enter")
        card = page.get_by_role("article", name="Approval request")
        await expect(card).to_contain_text("rm -rf b")
        await expect(page.locator(".pill[data-status=waiting_approval]")).to_be_visible()
        await shot(page, "8-approval-requested")
        await card.get_by_role("button", name="Allow once").click()
        await expect(card).to_contain_text("Allowed once")
        tool = page.locator(".tool-card", has_text="rm -rf b")
        await expect(tool).to_contain_text("cleaned")
        await expect(page.locator(".run-end")).to_contain_text("Done")
        await shot(page, "9-approval-allowed")

        await page.get_by_label("Approval mode").select_option("auto")
        await expect(page.get_by_label("Approval mode")).to_have_value("auto")
        assert (await srv.client.get(f"/api/conversations/{cid}")).json()["approval_mode"] == "auto"


class CuttableProxy:
    """A TCP relay in front of the server whose connections can be cut, like a dropped
    network: `cut()` aborts every open connection and refuses new ones until `restore()`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.down = False
        self.port = 0
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> CuttableProxy:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> None:
        self.down = True
        for client, upstream in tuple(self._pairs):
            client.transport.abort()
            upstream.transport.abort()
        self._pairs.clear()

    def restore(self) -> None:
        self.down = False

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        pair = (writer, up_writer)
        self._pairs.add(pair)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._pairs.discard(pair)


async def test_reconnect_shows_state_and_resumes_without_gaps(tmp_path: Path, page: Page) -> None:
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=[("bash", {"command": TICKS})]), ScriptedTurn(text="Ticked.")]
    )
    async with serving(tmp_path, page, provider) as srv:
        port = int(srv.base_url.rsplit(":", 1)[1])
        async with CuttableProxy(port) as proxy:
            cid = await srv.create_conversation("flaky network")
            await open_app(
                page, replace(srv, base_url=f"http://127.0.0.1:{proxy.port}"), f"/c/{cid}"
            )
            await page.get_by_label("Message").fill("tick")
            await page.get_by_label("Message").press("Enter")
            card = page.locator(".tool-card")
            await expect(card).to_contain_text("tick 2")
            proxy.cut()
            await expect(page.locator(".pill[data-connection=reconnecting]")).to_be_visible()
            await shot(page, "10-reconnecting")
            await asyncio.sleep(1)  # the run goes on while the browser is cut off
            proxy.restore()
            connection = page.locator(".pill[data-connection]")
            await expect(connection).to_have_count(0, timeout=20_000)
            await expect(page.locator(".run-end")).to_contain_text("Done", timeout=20_000)
            output = await card.locator(".tool-output pre").inner_text()
            assert output.split() == [w for i in range(1, 11) for w in ("tick", str(i))]
            await page.context.close()  # before the proxy goes: no stream left half-open


async def test_conversations_create_rename_delete(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, ScriptedProvider([])) as srv:
        await open_app(page, srv)
        nav = page.get_by_role("navigation", name="Conversations")
        await nav.get_by_role("button", name="+ New conversation").click()
        await expect(page).to_have_url(re.compile(r"/c/[^/]+$"))
        cid = page.url.rsplit("/", 1)[1]
        entry = nav.locator(f'[data-cid="{cid}"]')
        await expect(entry).to_contain_text("New conversation")

        await entry.hover()  # the entry's actions show on hover or keyboard focus
        await entry.get_by_role("button", name="Rename New conversation").click()
        title = nav.get_by_label("Conversation title")
        await title.fill("Owl sanctuary")
        await title.press("Enter")
        await expect(entry).to_contain_text("Owl sanctuary")
        await expect(page.get_by_role("heading", level=1)).to_have_text("Owl sanctuary")
        assert (await srv.client.get(f"/api/conversations/{cid}")).json()["title"] == (
            "Owl sanctuary"
        )

        await entry.hover()
        await entry.get_by_role("button", name="Delete Owl sanctuary").click()
        await entry.get_by_role("button", name="Confirm deleting Owl sanctuary").click()
        await expect(entry).to_have_count(0)
        await expect(page).to_have_url(re.compile(r"/$"))
        assert (await srv.client.get(f"/api/conversations/{cid}")).status_code == 404


async def test_first_run_offers_the_demo_model(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, ScriptedProvider([])) as srv:
        if "/api/settings/model" not in paths(srv):
            unavailable("the model settings endpoint")
        await open_app(page, srv)
        first_run = page.get_by_role("region", name="Connect a model")
        await expect(first_run).to_be_visible()
        await shot(page, "11-first-run")
        await first_run.get_by_role("button", name="Use the offline demo instead").click()
        await expect(first_run).to_have_count(0)
        await expect(page.locator(".model-name")).to_have_text("demo")
        assert (await srv.client.get("/api/health")).json()["model"] == "demo"

        await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
        dialog = page.get_by_role("dialog", name="Model")
        await expect(dialog.get_by_label("Model name")).to_have_value("demo")
        await dialog.get_by_label("API key").fill("sk-test-secret-123456")
        await dialog.get_by_label("Model name").fill("gpt-test")
        await dialog.get_by_role("button", name="Save").click()
        await expect(dialog).to_have_count(0)
        settings = (await srv.client.get("/api/settings/model")).json()
        assert settings["model"] == "gpt-test" and settings["api_key_set"]
        await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
        key = page.get_by_role("dialog", name="Model").get_by_label("API key")
        await expect(key).to_have_value("")  # never shown back
        placeholder = await key.get_attribute("placeholder") or ""
        assert "sk-test-secret-123456" not in placeholder and "set" in placeholder
        await shot(page, "12-settings")
