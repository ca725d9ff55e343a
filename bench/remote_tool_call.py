"""A conversation's bash tool call (`pwd && ls`) through the e2b backend to a
`burrow sandbox-host`, against the same call on a local sandbox, in the same run.

Both are real `burrow serve` children with a scripted model, measured from POST /messages
to the call's `tool.finished` on the SSE stream (as bench/api_tool_call.py). The remote
one runs with BURROW_SANDBOX=e2b and the stock SDK's variables pointing at a sandbox host
child on 127.0.0.1, so the figure is the control plane -> sandbox host hop (REST, envd's
Connect RPCs over HTTP) with no network distance; a real deployment adds its round trips.

Baseline: the local backend (bubblewrap on this machine, a Unix socket to its agent).
A second figure isolates the backend hop: the same command as a bare `Sandbox.exec`
(no server, no model, no journal) on an e2b sandbox and on a local one.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api_tool_call import COMMAND, RUNS, WARMUP, measure
from bench.common import free_port, p50, pct, report, spawn_serve, wait_healthy
from burrow.sandbox.backend import ExecRequest, Sandbox, closing_exec
from burrow.sandbox.e2b import E2BBackend
from burrow.sandbox.local import LocalBackend

# The host's sandboxes and the local ones alike: no cgroups, no network.
SAME_SANDBOXES = {"BURROW_SANDBOX_LIMITS": "false", "BURROW_SANDBOX_NETWORK": "none"}


def start_host(data: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """`burrow sandbox-host` on a free port; the SDK variables that point at it."""
    port, key = free_port(), "e2b_" + secrets.token_hex(20)
    command = [sys.executable, "-m", "burrow.cli", "sandbox-host", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--data-dir", str(data)]
    env = {**os.environ, **SAME_SANDBOXES, "BURROW_SANDBOX_HOST_API_KEYS": key}
    host = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if host.poll() is not None or time.monotonic() > deadline:
                host.kill()
                raise RuntimeError("burrow sandbox-host did not start") from None
            time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    return host, {"E2B_API_KEY": key, "E2B_API_URL": url, "E2B_SANDBOX_URL": url}


async def calls(data: Path, env: dict[str, str]) -> list[float]:
    turn = {"tool_calls": [{"name": "bash", "arguments": {"command": COMMAND}}]}
    script = data / "script.json"
    script.write_text(json.dumps([turn, {"text": "ok"}] * (RUNS + WARMUP)))
    server, base = spawn_serve(data, f"scripted:{script}", quiet=True, env=env)
    try:
        wait_healthy(server, base, poll=0.025)
        return await measure(base)
    finally:
        server.terminate()
        server.wait(10)


async def bare_execs(sandbox: Sandbox) -> list[float]:
    samples = []
    for index in range(RUNS + WARMUP):
        started = time.perf_counter()
        request = ExecRequest(argv=["sh", "-c", COMMAND], result_file="/tmp/burrow-cwd")
        async with closing_exec(sandbox.exec(request)) as events:
            async for _ in events:
                pass
        if index >= WARMUP:
            samples.append(time.perf_counter() - started)
    return samples


async def exec_figures(root: Path, api: dict[str, str]) -> tuple[list[float], list[float]]:
    local_backend = LocalBackend(root / "bare-local")
    remote_backend = E2BBackend(api=api, hibernation="files", network="none")
    try:
        local = await bare_execs(await local_backend.create("bench"))
        remote = await bare_execs(await remote_backend.create("bench"))
    finally:
        await remote_backend.destroy("bench")
        await local_backend.close()
    return local, remote


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in ("local", "e2b", "host"):
            (root / name).mkdir()
        local = await calls(root / "local", {"BURROW_SANDBOX": "local", **SAME_SANDBOXES})
        host, sdk = start_host(root / "host")
        try:
            remote_env = {"BURROW_SANDBOX": "e2b", "BURROW_E2B_HIBERNATION": "files", **sdk}
            remote_env["BURROW_SANDBOX_NETWORK"] = "none"
            remote = await calls(root / "e2b", remote_env)
            api = {
                "api_key": sdk["E2B_API_KEY"],
                "api_url": sdk["E2B_API_URL"],
                "sandbox_url": sdk["E2B_SANDBOX_URL"],
            }
            bare_local, bare_remote = await exec_figures(root, api)
        finally:
            host.terminate()
            host.wait(10)
    total, baseline = p50(remote) * 1000, p50(local) * 1000
    report(
        f"bash `pwd && ls` via e2b -> sandbox-host, API to tool.finished (n={RUNS})",
        total,
        "ms",
        "local sandbox",
        baseline,
        "informational",
    )
    print(
        f"  p90 e2b {pct(remote, 0.9) * 1000:.2f} ms, p90 local {pct(local, 0.9) * 1000:.2f} ms, "
        f"added p50 {total - baseline:.2f} ms"
    )
    report(
        f"Sandbox.exec `pwd && ls` + result file, e2b -> sandbox-host (n={RUNS})",
        p50(bare_remote) * 1000,
        "ms",
        "local Sandbox.exec",
        p50(bare_local) * 1000,
        "informational",
    )


if __name__ == "__main__":
    asyncio.run(main())
