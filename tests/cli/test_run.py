"""`burrow run`: headless, events streamed to stdout, exit status = run status."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any


def burrow_run(
    tmp_path: Path, turns: list[dict[str, Any]], *flags: str
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns))
    command = [sys.executable, "-m", "burrow.cli", "run", "--data-dir", str(tmp_path / "data")]
    command += ["--model", f"scripted:{script}", *flags, "make a file"]
    env = {**os.environ, "BURROW_ADMIN_PASSWORD": "cli-test-password"}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


def test_a_completed_run_prints_its_transcript_and_exits_0(tmp_path: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "A"}}]},
        {"text": "Wrote a.txt."},
    ]
    done = burrow_run(tmp_path, turns)
    assert done.returncode == 0, done.stderr
    assert "$ write_file" in done.stdout and "[ok" in done.stdout
    assert "Wrote a.txt." in done.stdout
    assert "[run completed]" in done.stdout


def test_json_lines_are_the_journal_and_a_failed_run_exits_1(tmp_path: Path) -> None:
    done = burrow_run(tmp_path, [{"text": "half", "error": "the model went away"}], "--json")
    assert done.returncode == 1
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "user.message"
    assert events[-1]["type"] == "run.finished"
    assert events[-1]["data"]["status"] == "failed"
    assert "the model went away" in events[-1]["data"]["error"]


def test_without_a_model_the_error_says_what_to_set(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BURROW_"))}
    command = [sys.executable, "-m", "burrow.cli", "run", "--data-dir", str(tmp_path), "hi"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1
    assert "No model configured: set OPENAI_API_KEY" in done.stdout


def test_a_file_tool_shows_no_exit_status(tmp_path: Path) -> None:
    """write_file runs no process: its line says ok and the time, never `exit None`."""
    turns = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "A"}}]},
        {"text": "Wrote a.txt."},
    ]
    done = burrow_run(tmp_path, turns)
    assert done.returncode == 0, done.stderr
    assert "exit None" not in done.stdout
    assert re.search(r"\[ok, \d+ ms\]", done.stdout), done.stdout


def test_a_command_still_shows_its_exit_status(tmp_path: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "exit 3"}}]},
        {"text": "It failed."},
    ]
    done = burrow_run(tmp_path, turns)
    assert re.search(r"\[error, exit 3, \d+ ms\]", done.stdout), done.stdout
