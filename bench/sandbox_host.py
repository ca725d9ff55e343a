"""The stock e2b SDK through `burrow sandbox-host` vs the same operations on a local
sandbox in-process, in one run: create, a `pwd && ls` command, a 4 KiB write + read.

    .venv/bin/python bench/sandbox_host.py [--creates 10] [--count 100]

What the ratio shows is the E2B protocol's cost (HTTP + Connect + JSON + the host's process
table) on top of the same bubblewrap sandbox; both sides run without cgroup limits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import free_port, p50, report
from burrow.sandbox.backend import ExecChunk, ExecRequest, closing_exec
from burrow.sandbox.local import LocalBackend

KEY = "e2b_" + "b" * 40
COMMAND = "pwd && ls"
PAYLOAD = b"x" * 4096


async def timed(
    count: int, action: Callable[[int], Awaitable[None]], warmup: int = 3
) -> list[float]:
    samples = []
    for index in range(count + warmup):
        started = time.perf_counter()
        await action(index)
        if index >= warmup:
            samples.append((time.perf_counter() - started) * 1000)
    return samples


async def local_figures(data_dir: Path, creates: int, count: int) -> dict[str, list[float]]:
    backend = LocalBackend(data_dir)
    try:

        async def create(index: int) -> None:
            await backend.create(f"create{index}")
            await backend.destroy(f"create{index}")

        sandbox = await backend.create("bench")
        await sandbox.write_file("README.md", b"hello\n")

        async def run(_: int) -> None:
            out = b""
            async with closing_exec(
                sandbox.exec(ExecRequest(["/bin/bash", "-l", "-c", COMMAND]))
            ) as events:
                async for event in events:
                    if isinstance(event, ExecChunk):
                        out += event.data
            assert out == b"/workspace\nREADME.md\n", out

        async def files(_: int) -> None:
            await sandbox.write_file("blob", PAYLOAD)
            assert await sandbox.read_file("blob") == PAYLOAD

        return {
            "create": await timed(creates, create),
            "run": await timed(count, run),
            "files": await timed(count, files),
        }
    finally:
        await backend.close()


async def sdk_figures(creates: int, count: int) -> dict[str, list[float]]:
    from e2b import AsyncSandbox

    async def create(_: int) -> None:
        created = await AsyncSandbox.create()
        await created.kill()

    sandbox = await AsyncSandbox.create()
    try:
        await sandbox.files.write("README.md", "hello\n")

        async def run(_: int) -> None:
            result = await sandbox.commands.run(COMMAND)
            assert result.stdout == "/home/user\nREADME.md\n", result.stdout

        async def files(_: int) -> None:
            await sandbox.files.write("blob", PAYLOAD)
            assert bytes(await sandbox.files.read("blob", format="bytes")) == PAYLOAD

        return {
            "create": await timed(creates, create),
            "run": await timed(count, run),
            "files": await timed(count, files),
        }
    finally:
        await sandbox.kill()


def start_host(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "BURROW_SANDBOX_HOST_API_KEYS": KEY,
        "BURROW_SANDBOX_LIMITS": "false",
        "BURROW_SANDBOX_NETWORK": "none",
    }
    command = [sys.executable, "-m", "burrow.cli", "sandbox-host", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--data-dir", str(data_dir)], env=env, stdout=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("burrow sandbox-host did not start")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--creates", type=int, default=10)
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="burrow-bench-") as root:
        local = await local_figures(Path(root) / "local", args.creates, args.count)
        process, url = start_host(Path(root) / "host")
        try:
            os.environ.update(E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=KEY)
            remote = await sdk_figures(args.creates, args.count)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(15)
    labels = {
        "create": f"sandbox create+kill via the e2b SDK (p50, n={args.creates})",
        "run": f"commands.run('{COMMAND}') via the e2b SDK (p50, n={args.count})",
        "files": f"4 KiB files.write + files.read via the e2b SDK (p50, n={args.count})",
    }
    for name, label in labels.items():
        report(
            label,
            p50(remote[name]),
            "ms",
            "the same on a local sandbox in-process (p50)",
            p50(local[name]),
            "none set (protocol overhead, informational)",
        )


if __name__ == "__main__":
    asyncio.run(main())
