"""Log lines written during a run carry its conversation and run ids, in text or JSON."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from burrow.llm.base import ScriptedTurn
from burrow.llm.retry import RetryingProvider
from burrow.llm.scripted import ScriptedProvider
from burrow.telemetry import logs
from tests.api.harness import running_server


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logs.configure("json", "WARNING", stream)
    try:
        yield stream
    finally:
        logger = logging.getLogger("burrow")
        logger.removeHandler(handler)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)


async def test_a_warning_inside_a_run_carries_its_ids(
    tmp_path: Path, json_log: io.StringIO
) -> None:
    turns = [
        ScriptedTurn(error="The model is overloaded.", error_retryable=True),
        ScriptedTurn(text="Fine now."),
    ]
    provider = RetryingProvider(ScriptedProvider(turns), base_delay=0.01, max_delay=0.02)
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run_id = (await srv.send(cid, "hello"))["run_id"]
        assert (await srv.run_finished(cid, run_id))["data"]["status"] == "completed"
        logging.getLogger("burrow.test").warning("outside any run")
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    [retry] = [e for e in lines if "retrying" in e["message"]]
    assert retry["level"] == "WARNING" and retry["logger"] == "burrow.llm.retry"
    assert (retry["conversation_id"], retry["run_id"]) == (cid, run_id)
    assert "overloaded" in retry["message"]
    [outside] = [e for e in lines if e["message"] == "outside any run"]
    assert (outside["conversation_id"], outside["run_id"]) == ("-", "-")


def test_text_lines_carry_the_ids_too() -> None:
    stream = io.StringIO()
    handler = logs.configure("text", "INFO", stream)
    try:
        context = logs.run_context("c_1", "r_1")
        context.run(logging.getLogger("burrow.x").info, "inside")
    finally:
        logging.getLogger("burrow").removeHandler(handler)
        logging.getLogger("burrow").propagate = True
    assert "INFO burrow.x [c_1 r_1] inside" in stream.getvalue()
