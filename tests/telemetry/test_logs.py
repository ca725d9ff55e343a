"""Log lines written during a run carry its conversation and run ids, in text or JSON."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from burrow.llm.base import ScriptedTurn
from burrow.llm.retry import RetryingProvider
from burrow.llm.scripted import ScriptedProvider
from burrow.telemetry import logs
from tests.api.harness import ADMIN_PASSWORD, running_server, serve_process


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


FORGED = "2026-12-01 00:00:00,000 CRITICAL burrow.api [- -] FORGED: admin password reset"


def test_a_newline_in_services_json_cannot_forge_a_log_line(tmp_path: Path) -> None:
    """`.burrow/services.json` is the workspace's (the model's, the user's): a service whose
    working directory holds a newline is logged on one line when it fails to start."""
    log = tmp_path / "stderr.log"
    services = [{"port": 5173, "command": "true", "cwd": f"/nowhere\n{FORGED}"}]
    with (
        log.open("wb") as stderr,
        serve_process(tmp_path / "data", "demo", stderr=stderr) as (_, base),
        httpx.Client(base_url=base, timeout=30) as api,
    ):
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        assert api.post("/api/auth/login", json=login).status_code == 200
        cid = api.post("/api/conversations", json={}).json()["id"]
        saved = api.put(
            f"/api/conversations/{cid}/files/content",
            params={"path": ".burrow/services.json"},
            content=json.dumps(services),
        )
        assert saved.status_code in (200, 204), saved.text
        # A restart starts the recorded services again: this one cannot start.
        assert api.post(f"/api/conversations/{cid}/sandbox/restart", json={}).is_success
    lines = log.read_text().splitlines()
    logged = [line for line in lines if "FORGED" in line]
    assert len(logged) == 1, lines
    assert "did not start" in logged[0] and "/nowhere\\n2026-12-01" in logged[0]
    assert not any(line.startswith(FORGED[:10]) for line in lines)


def test_every_line_of_a_record_but_its_first_is_indented() -> None:
    """Control characters escaped in the message; a traceback, whose exception's text may
    come from a sandbox, follows with every line indented under its record."""
    stream = io.StringIO()
    handler = logs.configure("text", "WARNING", stream)
    try:
        log = logging.getLogger("burrow.test")
        log.warning("service %s failed", f"web\r\n{FORGED}\x1b[2J")
        try:
            raise RuntimeError(f"cwd /nowhere\n{FORGED}")
        except RuntimeError:
            log.exception("it broke")
    finally:
        logger = logging.getLogger("burrow")
        logger.removeHandler(handler)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
    lines = stream.getvalue().splitlines()
    assert "service web\\r\\n2026-12-01" in lines[0] and lines[0].endswith("\\x1b[2J failed")
    assert "it broke" in lines[1]
    assert all(line.startswith("  | ") for line in lines[2:]), lines
    assert any(line.startswith("  | 2026-12-01") for line in lines)  # the forged line, held
