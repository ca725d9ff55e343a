"""The web UI: initial JS (gzip; target <= 300 KB) and navigation -> rendered timeline of a
2,000-event conversation (target <= 1 s), in Debian's Chromium against a real server.

Baseline, in the same run: navigating the same browser to a trivial page on the same server
(GET /api/health, rendered as a document).
"""

from __future__ import annotations

import asyncio
import gzip
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from playwright.async_api import Browser, async_playwright

from bench.common import BENCH_PASSWORD, p50, report, serve_in_process
from burrow.api.web import DIST
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal import events as ev
from burrow.runs.journal.events import make
from burrow.store.records import NewEvent

EVENTS = 2000
RUNS = 7
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]


def initial_js_gzip(dist: Path) -> tuple[int, list[str]]:
    """The gzipped bytes of every script index.html loads before the app can start."""
    html = (dist / "index.html").read_text()
    names = re.findall(r'<script[^>]+src="/([^"]+\.js)"', html)
    names += re.findall(r'<link[^>]+rel="modulepreload"[^>]+href="/([^"]+\.js)"', html)
    total = sum(len(gzip.compress((dist / n).read_bytes(), 9)) for n in names)
    return total, names


def conversation(run_id: str) -> list[NewEvent]:
    """A long, realistic session: text deltas, tool calls with streamed output, usage."""
    events = [make(ev.UserMessage(content="Build the thing, step by step.", steering=False))]
    events.append(make(ev.RunStarted(run_id=run_id), run_id))
    step = 0
    while len(events) < EVENTS - 1:
        call = f"call_{step}"
        text = f"Step {step}: checking the **build** output and fixing `module_{step}.py`."
        events += [make(ev.TextDelta(text=w), run_id) for w in text.split(" ", 2)]
        command = f"python3 -m pytest tests/test_{step}.py -q"
        events += [
            make(ev.AssistantMessage(content=text, thinking="", tool_calls=[]), run_id),
            make(ev.UsageReported(prompt_tokens=1200, completion_tokens=40, cost=0.001), run_id),
            make(ev.ToolStarted(call_id=call, name="bash", arguments={"command": command}), run_id),
        ]
        events += [
            make(ev.ToolOutput(call_id=call, stream="stdout", text=f"line {i}\n"), run_id)
            for i in range(2)
        ]
        finished = ev.ToolFinished(
            call_id=call, output="line 0\nline 1", is_error=False, exit_code=0
        )
        events.append(make(finished, run_id))
        step += 1
    events = events[: EVENTS - 1]
    usage = ev.Usage(prompt_tokens=1200 * step, completion_tokens=40 * step, cost=0.001 * step)
    events.append(make(ev.RunFinished(status="completed", error=None, usage=usage), run_id))
    return events


async def timeline_ms(browser: Browser, base: str, cid: str) -> float:
    # bypass_csp: the probe below is a string Playwright evaluates, which the app's policy
    # (no 'unsafe-eval') refuses; the page itself renders the same either way.
    context = await browser.new_context(viewport={"width": 1280, "height": 800}, bypass_csp=True)
    try:
        login = {"username": "admin", "password": BENCH_PASSWORD}
        await context.request.post(f"{base}/api/auth/login", data=login)
        page = await context.new_page()
        begin = time.perf_counter()
        await page.goto(f"{base}/c/{cid}", wait_until="commit")
        await page.wait_for_function(
            f"Number(document.querySelector('.timeline')?.dataset.lastSeq) >= {EVENTS}"
            " && document.querySelectorAll('.run-end').length === 1",
            polling="raf",
            timeout=10_000,
        )
        return (time.perf_counter() - begin) * 1000
    finally:
        await context.close()


async def trivial_ms(browser: Browser, base: str) -> float:
    context = await browser.new_context()
    try:
        page = await context.new_page()
        begin = time.perf_counter()
        await page.goto(f"{base}/api/health", wait_until="load")
        return (time.perf_counter() - begin) * 1000
    finally:
        await context.close()


async def main() -> None:
    if not (DIST / "index.html").is_file():
        sys.exit(f"{DIST} is missing: run `make web` first")
    size, names = initial_js_gzip(DIST)
    print(f"initial JS: {', '.join(names)}")
    report("initial JS (gzip)", size / 1024, "KB", "target", 300, "<= 300 KB (ratio <= 1)")

    with tempfile.TemporaryDirectory() as tmp:
        async with serve_in_process(Path(tmp), lambda: ScriptedProvider([])) as (base, svc, c):
            created = await c.post("/api/conversations", json={"title": "2,000 events"})
            cid = created.json()["id"]
            events = conversation("r_bench")
            for i in range(0, len(events), 200):
                await svc.journal.append(cid, *events[i : i + 200])
            async with async_playwright() as p:
                browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                try:
                    await timeline_ms(browser, base, cid)  # warm the browser's caches
                    await trivial_ms(browser, base)
                    rendered, trivial = [], []
                    for _ in range(RUNS):
                        rendered.append(await timeline_ms(browser, base, cid))
                        trivial.append(await trivial_ms(browser, base))
                finally:
                    await browser.close()
    report(
        f"navigation -> rendered timeline of {EVENTS} events (p50 of {RUNS})",
        p50(rendered),
        "ms",
        "navigation to /api/health",
        p50(trivial),
        "<= 1000 ms",
    )


if __name__ == "__main__":
    asyncio.run(main())
