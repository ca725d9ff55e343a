"""A client that drops and reconnects with Last-Event-ID sees exactly what a client that
never dropped sees: no gap, no duplicate, no reordering."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, running_server, sse_events

DROPS = 200


def _busy_script() -> list[ScriptedTurn]:
    """A run of several hundred events: tool calls with output, text, thinking."""
    turns = [
        ScriptedTurn(
            text=f"Step {step}.",
            thinking="Counting.",
            tool_calls=[("bash", {"command": f"echo {step}-{i}"}) for i in range(8)],
        )
        for step in range(20)
    ]
    return [*turns, ScriptedTurn(text="Finished counting.")]


async def _steady_reader(srv: RunningServer, cid: str) -> list[dict[str, Any]]:
    events = []
    async for event in sse_events(srv.client, cid):
        events.append(event)
        if event["type"] == "run.finished":
            return events
    raise AssertionError("stream ended early")


async def _dropping_reader(
    srv: RunningServer, cid: str, rng: random.Random
) -> tuple[list[dict[str, Any]], int]:
    events: list[dict[str, Any]] = []
    drops = 0
    while True:
        last = events[-1]["seq"] if events else None
        keep = rng.randint(1, 3)
        stream = sse_events(srv.client, cid, last_event_id=last)
        async for event in stream:
            events.append(event)
            keep -= 1
            if event["type"] == "run.finished":
                await stream.aclose()
                return events, drops
            if keep == 0:
                break
        await stream.aclose()  # drop the connection after a random event
        drops += 1


async def test_reconnecting_client_reconstructs_the_exact_sequence(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    async with running_server(tmp_path, lambda: ScriptedProvider(_busy_script())) as srv:
        cid = await srv.create_conversation()
        steady = asyncio.create_task(_steady_reader(srv, cid))
        dropping = asyncio.create_task(_dropping_reader(srv, cid, rng))
        await asyncio.sleep(0.05)  # both subscribed before the run starts
        await srv.send(cid, "count")
        async with asyncio.timeout(120):
            reference = await steady
            reconstructed, drops = await dropping
        assert drops >= DROPS, f"only {drops} drops: make the run longer"
        assert reconstructed == reference
        assert [e["seq"] for e in reference] == list(range(1, len(reference) + 1))
        assert reference == await srv.events(cid)
