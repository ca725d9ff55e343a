"""A real model's turn (issue 22, item 6): Burrow is never the slow part of it.

SmolLM2-135M-Instruct on llama.cpp (`tests/real_model/server.mjs`, `make real-model`)
drives real runs through Burrow's own OpenAI provider and real sandboxes. Two figures per
tool call, each p50, on one clock (CLOCK_MONOTONIC, which the model server logs too):

- last token -> tool start: from the model server writing the end of the answer that asked
  for the call (its log's `answered_at`) to the commit of the call's `tool.started`;
- tool exit -> next request sent: from the commit of the call's `tool.finished` to the
  request that follows being handed to the HTTP connection (the shared pool's request
  hook, burrow/llm/http_pool.py); printed beside it, to the model server receiving it (its
  `received_at`: the OpenAI SDK's own request building and the loopback on top).

The first includes the loopback HTTP from the model server, which Burrow cannot avoid; the
baseline, in the same run, is a bare HTTP round trip from this process to the same model
server (`GET /health`, httpx). Target: each <= 2 ms p50.

    .venv/bin/python bench/real_model_turn.py [--runs 2] [--steps 10]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, pct, report, serve_in_process
from burrow.llm.factory import ModelConfig, provider_from_config
from burrow.llm.http_pool import shared_http
from burrow.store.records import Event
from tests.real_model.conftest import MODEL, NODE_MODULES, WEIGHTS, real_model

PROMPT = "List the files in the workspace."  # the model answers it with calls, run after run


class Commits:
    """When each tool call's `tool.started` and `tool.finished` were committed (ns)."""

    def __init__(self) -> None:
        self.started: dict[str, int] = {}
        self.finished: dict[str, int] = {}
        self.sent: list[int] = []  # each model request handed to the connection

    async def request_sent(self, request: object) -> None:
        self.sent.append(time.monotonic_ns())

    def __call__(self, batch: Sequence[Event]) -> None:
        now = time.monotonic_ns()
        for event in batch:
            if event.type == "tool.started":
                self.started[str(event.data["call_id"])] = now
            elif event.type == "tool.finished":
                self.finished[str(event.data["call_id"])] = now


def turn_samples(
    requests: list[dict[str, Any]], commits: Commits
) -> tuple[list[float], list[float], list[float]]:
    """(last token -> tool start, tool exit -> next request sent, ... -> received) in ms,
    per call the model made whose commits were seen; a request's last call is the one the
    next request follows."""
    to_start, to_sent, to_received = [], [], []
    answered = [r for r in requests if "answered_at" in r]
    for index, request in enumerate(answered):
        calls = [c["id"] for c in request["calls"] if c["id"] in commits.started]
        for call in calls:
            to_start.append(commits.started[call] / 1e6 - request["answered_at"])
        if calls and index + 1 < len(answered) and calls[-1] in commits.finished:
            finished = commits.finished[calls[-1]]
            gap = answered[index + 1]["received_at"] - finished / 1e6
            if 0 <= gap < 1000:  # the same run's next turn, not the next run's first
                to_received.append(gap)
                sent = min(t for t in commits.sent if t >= finished)
                to_sent.append((sent - finished) / 1e6)
    return to_start, to_sent, to_received


async def bare_round_trip(base: str, count: int = 50) -> float:
    async with httpx.AsyncClient() as client:
        await client.get(f"{base}/health")
        samples = []
        for _ in range(count):
            started = time.perf_counter()
            await client.get(f"{base}/health")
            samples.append((time.perf_counter() - started) * 1000)
    return p50(samples)


async def converse(client: httpx.AsyncClient, steps: int) -> None:
    cid = (await client.post("/api/conversations", json={"title": "bench"})).json()["id"]
    patched = await client.patch(f"/api/conversations/{cid}", json={"budget": {"steps": steps}})
    assert patched.status_code == 200, patched.text
    sent = await client.post(f"/api/conversations/{cid}/messages", json={"content": PROMPT})
    assert sent.status_code == 202, sent.text
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        # Seldom, and only the tail: this client shares the server's event loop.
        await asyncio.sleep(0.5)
        page = await client.get(f"/api/conversations/{cid}/events", params={"format": "json"})
        if any(e["type"] == "run.finished" for e in page.json()):
            return
    raise RuntimeError("a run did not finish within 300 s")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    if not WEIGHTS.exists() or not (NODE_MODULES / ".installed").exists():
        raise SystemExit("the real model is not installed: run `make real-model` first")
    with tempfile.TemporaryDirectory() as tmp, real_model(Path(tmp)) as model:
        config = ModelConfig(model=MODEL, api_key="sk-local", base_url=model.base_url)
        commits = Commits()
        async with serve_in_process(Path(tmp) / "data", lambda: provider_from_config(config)) as (
            _,
            services,
            client,
        ):
            services.journal.observers.append(commits)
            shared_http().event_hooks["request"].append(commits.request_sent)
            for _ in range(args.runs):
                await converse(client, args.steps)
        baseline = await bare_round_trip(model.base_url.removesuffix("/v1"))
        to_start, to_sent, to_received = turn_samples(model.requests(), commits)
    if len(to_start) < 5 or len(to_sent) < 3:
        raise SystemExit(f"too few tool calls to measure: {len(to_start)}, {len(to_sent)}")
    for name, samples in [
        (f"last token -> tool start (n={len(to_start)})", to_start),
        (f"tool exit -> next request sent (n={len(to_sent)})", to_sent),
    ]:
        report(name, p50(samples), "ms", "bare HTTP round trip", baseline, "<= 2 ms")
        print(f"  p90 {pct(samples, 0.9):.2f} ms, max {max(samples):.2f} ms")
    print(f"  tool exit -> the model server has the request: p50 {p50(to_received):.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
