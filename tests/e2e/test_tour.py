"""A new user's tour of the UI (issue 12): each defect they met, in a real browser.

The server is real (`burrow serve` or the in-process harness) and only the model is scripted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import httpx
from playwright.async_api import Browser, Locator, Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.demo import DemoProvider
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import ADMIN_PASSWORD, RunningServer, free_port, running_server
from tests.e2e.conftest import shot

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
SLOW = 30_000  # ms: waits that span a server start on a busy 2-core machine


class ServeProcess:
    """`burrow serve` as a child on a fixed port, so it can be killed and started again."""

    def __init__(self, data_dir: Path, model: str) -> None:
        self.data_dir = data_dir
        self.model = model
        self.port = free_port()
        self.preview_port = free_port()
        self.base = f"http://localhost:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "BURROW_ADMIN_PASSWORD": ADMIN_PASSWORD}
        command = [sys.executable, "-m", "burrow.cli", "serve", "--port", str(self.port)]
        command += ["--preview-port", str(self.preview_port), "--data-dir", str(self.data_dir)]
        self.process = subprocess.Popen([*command, "--model", self.model], env=env)
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.base}/api/health", timeout=1).status_code == 200:
                    return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"burrow serve did not become healthy ({self.process.poll()})")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)


@contextlib.contextmanager
def serve(tmp_path: Path, turns: list[dict[str, object]]) -> Iterator[ServeProcess]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns))
    server = ServeProcess(tmp_path / "data", f"scripted:{script}")
    server.start()
    try:
        yield server
    finally:
        server.kill()


def base_of(srv: RunningServer) -> str:
    return srv.base_url.replace("127.0.0.1", "localhost")


async def sign_in(page: Page, base: str, path: str = "/") -> None:
    login = {"username": "admin", "password": ADMIN_PASSWORD}
    assert (await page.request.post(f"{base}/api/auth/login", data=login)).ok
    await page.goto(base + path)
    await expect(page.get_by_role("navigation", name="Conversations")).to_be_visible()


async def test_a_server_killed_mid_run_leaves_a_failed_run_not_a_blank_page(
    tmp_path: Path, browser: Browser
) -> None:
    context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    context.set_default_timeout(30_000)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    text = " ".join(f"word{i}" for i in range(200))
    with serve(tmp_path, [{"text": text, "delay": 0.05}]) as server:
        try:
            await sign_in(page, server.base)
            composer = page.get_by_label("Message")
            await composer.fill("Tell me a long story")
            await composer.press("Enter")
            await expect(page.locator(".assistant")).to_contain_text("word10")
            server.kill()
            await expect(page.locator(".pill[data-connection=reconnecting]")).to_be_visible(
                timeout=SLOW
            )
            # While the server is down nothing claims the run is still going.
            await expect(page.locator(".pill[data-status=running]")).to_have_count(0)
            entry = page.get_by_role("navigation", name="Conversations").locator(".conv-status")
            await expect(entry).to_have_text("server unreachable", timeout=SLOW)
            # Said there and in the header, not in a toast over Stop and Steer.
            await expect(page.locator(".toast")).to_have_count(0)
            stop = page.get_by_role("button", name="Stop", exact=True)
            await eventually(lambda: unobstructed(page, stop), "Stop can be pressed")
            await shot(page, "tour-1-server-down")
            server.start()
            # The repaired run.finished arrives on reconnect: a failed run, a usable app.
            await expect(page.locator(".run-end.failed")).to_be_visible(timeout=SLOW)
            await expect(page.locator(".run-end.failed")).to_contain_text("tokens")
            await expect(page.get_by_label("Message")).to_be_visible()
            await page.reload()
            await expect(page.locator(".run-end.failed")).to_be_visible(timeout=SLOW)
            await expect(page.get_by_label("Message")).to_be_visible()
            await shot(page, "tour-1-restarted")
            assert not errors, errors
        finally:
            await context.close()


@contextlib.asynccontextmanager
async def harness(
    tmp_path: Path, browser: Browser, turns: list[ScriptedTurn], viewport: dict[str, int]
) -> AsyncIterator[tuple[RunningServer, Page]]:
    """An in-process server with a scripted model, and a page signed in to it."""
    provider = ScriptedProvider(turns, chunk_delay=0.02)
    async with running_server(tmp_path, lambda: provider) as srv:
        context = await browser.new_context(viewport=viewport)  # type: ignore[arg-type]
        context.set_default_timeout(15_000)
        try:
            yield srv, await context.new_page()
        finally:
            await context.close()  # its streams first, so the server can stop


async def test_steering_while_text_streams_keeps_the_answer_whole(
    tmp_path: Path, browser: Browser
) -> None:
    story = " ".join(f"w{i}" for i in range(60)) + " THE END."
    turns = [ScriptedTurn(text=story, delay=0.05), ScriptedTurn(text="Shorter next time.")]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("steer")
        await sign_in(page, base_of(srv), f"/c/{cid}")
        await page.get_by_label("Message").fill("Tell me a story")
        await page.get_by_label("Message").press("Enter")
        await expect(page.locator(".assistant").first).to_contain_text("w3")
        steer = page.get_by_label("Steer the running agent")
        await steer.fill("make it short")
        await steer.press("Enter")
        bubble = page.locator(".row-user", has_text="make it short")
        await expect(bubble).to_be_visible()
        # Live: the words after the bubble appeared still stream into the one answer above it.
        await expect(page.locator(".assistant").first).to_contain_text("w40")
        await expect(page.locator(".run-end")).to_contain_text("Done", timeout=SLOW)
        rows = await page.locator(".timeline .row").all_inner_texts()
        shot_rows = [r.strip() for r in rows]
        answers = [r for r in shot_rows if "w0" in r]
        assert len(answers) == 1 and "THE END." in answers[0], shot_rows
        order = [i for i, r in enumerate(shot_rows) if "THE END." in r or "make it short" in r]
        assert shot_rows[order[0]].startswith("w0") and "make it short" in shot_rows[order[1]]
        await page.reload()  # the replay shows the same
        await expect(page.locator(".run-end")).to_contain_text("Done")
        assert [r.strip() for r in await page.locator(".timeline .row").all_inner_texts()] == (
            shot_rows
        )
        await shot(page, "tour-2-steered")


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 30) -> None:
    """Wait until `check()` holds (polled: a condition, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.1)


async def unobstructed(page: Page, locator: Locator) -> bool:
    """Whether `locator` is on screen and on top at its centre (not under the composer)."""
    box = await locator.bounding_box()
    if box is None:
        return False
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    viewport = page.viewport_size or {"width": 0, "height": 0}
    if not (0 <= x < viewport["width"] and 0 <= y < viewport["height"]):
        return False
    hit: bool = await locator.evaluate(
        "(el, [x, y]) => el.contains(document.elementFromPoint(x, y))", [x, y]
    )
    return hit


async def test_a_phone_opens_a_conversation_at_its_end_with_the_approval_in_reach(
    tmp_path: Path, browser: Browser
) -> None:
    long_answer = "\n\n".join(f"Paragraph {i} of a long answer." for i in range(60))
    turns = [
        ScriptedTurn(text=long_answer),
        ScriptedTurn(text="Cleaning up.", tool_calls=[("bash", {"command": "rm -rf build"})]),
        ScriptedTurn(text="Clean."),
    ]
    async with harness(tmp_path, browser, turns, PHONE) as (srv, page):
        cid = await srv.create_conversation("long one")
        first = await srv.send(cid, "write a lot")
        await srv.run_finished(cid, first["run_id"])
        await srv.send(cid, "clean the build")
        await srv.wait_for(cid, lambda e: e["type"] == "approval.requested")
        await sign_in(page, base_of(srv))
        await page.get_by_role("button", name="Conversations").click()
        await page.get_by_role("navigation").locator(f'[data-cid="{cid}"] .conv-open').click()
        allow = page.get_by_role("button", name="Allow once")
        await expect(allow).to_be_visible()
        await eventually(lambda: unobstructed(page, allow), "Allow once is on screen, on top")
        await shot(page, "tour-3-phone-approval")
        await allow.click()
        await expect(page.locator(".run-end").last).to_contain_text("Done", timeout=SLOW)


async def test_a_file_with_long_lines_stays_inside_the_files_panel(
    tmp_path: Path, browser: Browser
) -> None:
    line = "const x = [" + ", ".join(str(i) for i in range(600)) + "];\n"
    turns = [
        ScriptedTurn(tool_calls=[("write_file", {"path": "long.js", "content": line * 3})]),
        ScriptedTurn(text="Written."),
    ]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("long lines")
        sent = await srv.send(cid, "write it")
        await srv.run_finished(cid, sent["run_id"])
        await sign_in(page, base_of(srv), f"/c/{cid}")
        await page.get_by_role("tab", name="Files").click()
        await page.get_by_role("tree").get_by_role("button", name=re.compile(r"^long\.js")).click()
        await expect(page.locator(".viewer pre.code")).to_contain_text("599")
        for control in (
            page.get_by_role("link", name="Download"),
            page.get_by_role("button", name="Refresh files"),
        ):
            await eventually(lambda c=control: unobstructed(page, c), "the control is on screen")
        panel = await page.get_by_role("complementary", name="Sandbox").bounding_box()
        assert panel is not None and panel["x"] + panel["width"] <= DESKTOP["width"]
        code = page.locator(".viewer pre.code")
        assert await code.evaluate("el => el.scrollWidth > el.clientWidth")  # scrolls inside
        await shot(page, "tour-4-long-lines")


async def test_a_missing_or_deleted_conversation_says_it_is_gone(
    tmp_path: Path, browser: Browser
) -> None:
    async with harness(tmp_path, browser, [], DESKTOP) as (srv, page):
        await sign_in(page, base_of(srv), "/c/c_doesnotexist")
        gone = page.get_by_role("alert", name="Conversation not found")
        await expect(gone).to_contain_text("does not exist", timeout=SLOW)
        await expect(page.locator(".pill[data-connection]")).to_have_count(0)
        await shot(page, "tour-5-gone")
        await gone.get_by_role("button", name="Show conversations").click()
        await expect(page).to_have_url(re.compile(r"/$"))

        cid = await srv.create_conversation("short-lived")
        await page.goto(f"{base_of(srv)}/c/{cid}")
        await expect(page.get_by_role("heading", level=1)).to_have_text("short-lived")
        await expect(page.locator(".pill[data-connection]")).to_have_count(0)  # live
        assert (await srv.client.delete(f"/api/conversations/{cid}")).status_code == 204
        await expect(gone).to_be_visible(timeout=SLOW)


async def test_rename_and_delete_are_reachable_on_a_phone(tmp_path: Path, browser: Browser) -> None:
    async with harness(tmp_path, browser, [], PHONE) as (srv, page):
        cid = await srv.create_conversation("Pocket project")
        await sign_in(page, base_of(srv))
        await page.get_by_role("button", name="Conversations").click()
        nav = page.get_by_role("navigation", name="Conversations")
        entry = nav.locator(f'[data-cid="{cid}"]')
        rename = entry.get_by_role("button", name="Rename Pocket project")
        await expect(rename).to_be_visible()  # no hover needed: a finger cannot hover
        await shot(page, "tour-6-phone-actions")
        await rename.click()
        await nav.get_by_label("Conversation title").fill("Pocket garden")
        await nav.get_by_label("Conversation title").press("Enter")
        await expect(entry).to_contain_text("Pocket garden")
        await entry.get_by_role("button", name="Delete Pocket garden").click()
        await entry.get_by_role("button", name="Confirm deleting Pocket garden").click()
        await expect(entry).to_have_count(0)
        assert (await srv.client.get(f"/api/conversations/{cid}")).status_code == 404


async def test_the_list_follows_activity_and_keeps_no_empties(
    tmp_path: Path, browser: Browser
) -> None:
    turns = [ScriptedTurn(text=f"Answer {i}.") for i in range(3)]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        older = await srv.create_conversation("Older")
        await srv.run_finished(older, (await srv.send(older, "one"))["run_id"])
        newer = await srv.create_conversation("Newer")
        await srv.run_finished(newer, (await srv.send(newer, "two"))["run_id"])

        async def order() -> list[str]:
            listed = (await srv.client.get("/api/conversations")).json()
            return [c["title"] for c in listed]

        assert await order() == ["Newer", "Older"]
        await sign_in(page, base_of(srv), f"/c/{older}")
        nav = page.get_by_role("navigation", name="Conversations")
        # Viewing it wakes its sandbox; renaming it: neither is activity.
        await page.get_by_role("button", name="Show files").click()
        await expect(page.get_by_text("The workspace is empty.")).to_be_visible(timeout=SLOW)
        entry = nav.locator(f'[data-cid="{older}"]')
        await entry.hover()
        await entry.get_by_role("button", name="Rename Older").click()
        await nav.get_by_label("Conversation title").fill("Older, renamed")
        await nav.get_by_label("Conversation title").press("Enter")
        await expect(entry).to_contain_text("Older, renamed")
        assert await order() == ["Newer", "Older, renamed"]
        await expect(nav.locator(".conv-title")).to_have_text(["Newer", "Older, renamed"])

        # "+ New conversation" clicked three times stores one empty conversation, not three.
        for _ in range(3):
            await nav.get_by_role("button", name="+ New conversation").click()
            await expect(page).to_have_url(re.compile(r"/c/[^/]+$"))
            await expect(nav.locator(".conv")).to_have_count(3)
        assert len(await order()) == 3

        # A message is activity: that conversation goes to the top.
        await page.goto(f"{base_of(srv)}/c/{older}")
        await page.get_by_label("Message").fill("three")
        await page.get_by_label("Message").press("Enter")
        await expect(page.locator(".run-end")).to_have_count(2, timeout=SLOW)
        assert (await order())[0] == "Older, renamed"


async def test_the_preview_status_follows_the_sandbox_and_speaks_to_the_person(
    tmp_path: Path, browser: Browser
) -> None:
    command = "mkdir -p site && echo '<h1>Hi</h1>' > site/index.html"
    serve_site = "python3 -m http.server 8000 -d site"
    turns = [
        ScriptedTurn(tool_calls=[("bash", {"command": command})]),
        ScriptedTurn(tool_calls=[("preview", {"command": serve_site, "port": 8000})]),
        ScriptedTurn(text="Up."),
    ]
    provider = ScriptedProvider(turns)
    async with running_server(tmp_path, lambda: provider, preview=True) as srv:
        context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
        try:
            page = await context.new_page()
            cid = await srv.create_conversation("preview")
            await srv.run_finished(cid, (await srv.send(cid, "serve it"))["run_id"], timeout=60)
            assert await srv.services.runtime.sandboxes.hibernate(cid)
            await sign_in(page, base_of(srv), f"/c/{cid}")
            card = page.locator(".tool-card", has_text="http.server")
            await card.click()  # open it: its result is what a person reads
            await expect(card).to_contain_text("shown in the preview panel", timeout=SLOW)
            await expect(card).not_to_contain_text("the user sees it")
            await page.get_by_role("tab", name="Preview").click()
            heading = page.frame_locator(".preview iframe").locator("h1")
            await expect(heading).to_have_text("Hi", timeout=SLOW)  # opening it woke the sandbox
            await expect(page.locator(".sandbox-state")).to_have_text("sandbox ready")
            await expect(page.locator(".preview .badge.warn")).to_have_count(0, timeout=SLOW)
            await shot(page, "tour-9-preview-woken")
        finally:
            await context.close()


async def test_a_failed_run_shows_in_the_list(tmp_path: Path, browser: Browser) -> None:
    turns = [ScriptedTurn(error="The model server answered 500.")]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("Doomed")
        other = await srv.create_conversation("Other")
        await srv.run_finished(cid, (await srv.send(cid, "go"))["run_id"])
        listed = {c["id"]: c for c in (await srv.client.get("/api/conversations")).json()}
        assert listed[cid]["status"] == "idle" and listed[cid]["last_run_failed"]
        await sign_in(page, base_of(srv), f"/c/{other}")
        nav = page.get_by_role("navigation", name="Conversations")
        status = nav.locator(f'[data-cid="{cid}"] .conv-status')
        await expect(status).to_have_text("last run failed")
        await nav.locator(f'[data-cid="{cid}"] .conv-open').click()
        await expect(page.locator(".run-end.failed")).to_be_visible()
        await expect(status).to_have_text("last run failed")


async def test_the_demo_in_read_only_mode_says_its_calls_were_refused(
    tmp_path: Path, browser: Browser
) -> None:
    async with running_server(tmp_path, lambda: DemoProvider(chunk_delay=0)) as srv:
        context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
        try:
            page = await context.new_page()
            cid = await srv.create_conversation("read only")
            await sign_in(page, base_of(srv), f"/c/{cid}")
            await page.get_by_label("Approval mode").select_option("read_only")
            await expect(page.get_by_label("Approval mode")).to_have_value("read_only")
            await page.get_by_label("Message").fill("a page about owls")
            await page.get_by_label("Message").press("Enter")
            await expect(page.locator(".run-end")).to_contain_text("Done", timeout=SLOW)
            answer = page.locator(".assistant").last
            await expect(answer).to_contain_text("nothing was written")
            await expect(answer).to_contain_text("read-only")
            await expect(page.locator(".timeline")).not_to_contain_text("I wrote")
            await shot(page, "tour-10-read-only-demo")
        finally:
            await context.close()


async def test_an_unreachable_model_set_in_the_ui_names_the_settings_field(
    tmp_path: Path, browser: Browser
) -> None:
    async with running_server(tmp_path, None) as srv:
        context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
        try:
            page = await context.new_page()
            cid = await srv.create_conversation("unreachable")
            await sign_in(page, base_of(srv), f"/c/{cid}")
            await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
            dialog = page.get_by_role("dialog", name="Model")
            await dialog.get_by_label("Model name").fill("gpt-test")
            await dialog.get_by_label("Base URL").fill(f"http://127.0.0.1:{free_port()}/v1")
            await dialog.get_by_label("API key").fill("sk-test-unreachable")
            await dialog.get_by_role("button", name="Save").click()
            await expect(dialog).to_have_count(0)
            await page.get_by_label("Message").fill("hello")
            await page.get_by_label("Message").press("Enter")
            failed = page.locator(".run-end.failed")
            await expect(failed).to_contain_text("Could not reach the model server", timeout=SLOW)
            await expect(failed).to_contain_text("check the base URL in Settings")
            await expect(failed).not_to_contain_text("OPENAI_BASE_URL")
            await shot(page, "tour-10-unreachable-model")
        finally:
            await context.close()


async def test_the_files_tree_hides_burrows_own_folders(tmp_path: Path, browser: Browser) -> None:
    make = "mkdir -p .burrow/outputs .burrow/services && echo log > .burrow/outputs/1.log"
    turns = [
        ScriptedTurn(tool_calls=[("bash", {"command": f"{make} && echo hi > app.py"})]),
        ScriptedTurn(text="Made."),
    ]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("internals")
        await srv.run_finished(cid, (await srv.send(cid, "make"))["run_id"])
        await sign_in(page, base_of(srv), f"/c/{cid}")
        await page.get_by_role("tab", name="Files").click()
        tree = page.get_by_role("tree")
        await expect(tree.get_by_role("button", name=re.compile(r"^app\.py"))).to_be_visible()
        await expect(tree.get_by_role("button", name=".burrow")).to_have_count(0)
        # Still there on request.
        listed = await srv.client.get(
            f"/api/conversations/{cid}/files", params={"path": ".burrow", "internal": True}
        )
        assert {e["name"] for e in listed.json()} == {"outputs", "services"}


async def test_the_sign_in_screen_loads_with_one_probe_not_a_burst_of_401s(
    tmp_path: Path, browser: Browser
) -> None:
    async with harness(tmp_path, browser, [], DESKTOP) as (srv, page):
        refused: list[str] = []
        page.on("response", lambda r: refused.append(r.url) if r.status == 401 else None)
        await page.goto(base_of(srv) + "/")
        await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        await expect(page.get_by_label("Password")).to_be_visible()
        await page.wait_for_load_state("networkidle")
        assert [url.split("/api/", 1)[1] for url in refused] == ["me"]


async def test_a_denied_call_is_shown_once(tmp_path: Path, browser: Browser) -> None:
    turns = [
        ScriptedTurn(text="Cleaning.", tool_calls=[("bash", {"command": "rm -rf build"})]),
        ScriptedTurn(text="Left it alone."),
    ]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("deny")
        await sign_in(page, base_of(srv), f"/c/{cid}")
        await page.get_by_label("Message").fill("clean")
        await page.get_by_label("Message").press("Enter")
        request = page.get_by_role("article", name="Approval request")
        await request.get_by_role("button", name="Deny").click()
        await expect(page.locator(".run-end")).to_contain_text("Done", timeout=SLOW)
        await expect(page.locator(".tool-card", has_text="rm -rf build")).to_contain_text("denied")
        await expect(request).to_have_count(0)  # the tool card tells it; not a second card
        await page.reload()
        await expect(page.locator(".run-end")).to_contain_text("Done")
        await expect(request).to_have_count(0)
