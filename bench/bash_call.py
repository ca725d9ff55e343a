"""One `pwd && ls` bash tool call on a ready sandbox vs a bare host spawn of the same.

    .venv/bin/python bench/bash_call.py [--count 200]

Budget (DESIGN.md section 7): overhead <= 5 ms p50 over a bare spawn.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from burrow.sandbox.backend import Sandbox
from burrow.sandbox.local import LocalBackend
from burrow.tools.base import ToolContext
from burrow.tools.bash import BashTool

COMMAND = "pwd && ls"


async def bare_spawn_ms(count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            "sh", "-c", COMMAND, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        await process.communicate()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def tool_call_ms(data_dir: Path, count: int) -> list[float]:
    backend = LocalBackend(data_dir)
    try:
        sandbox = await backend.create("bench")
        await sandbox.write_file("README.md", b"hello\n")

        async def get_sandbox() -> Sandbox:
            return sandbox

        bash = BashTool()
        samples = []
        for index in range(count + 5):
            ctx = ToolContext(sandbox=get_sandbox, call_id=f"call_{index}")
            started = time.perf_counter()
            result = await bash.run({"command": COMMAND}, ctx)
            elapsed = (time.perf_counter() - started) * 1000
            assert result.output == "/workspace\nREADME.md", result.output
            if index >= 5:  # the first calls warm caches
                samples.append(elapsed)
        return samples
    finally:
        await backend.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=200)
    count = parser.parse_args().count
    baseline = await bare_spawn_ms(count)
    with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
        calls = await tool_call_ms(Path(data_dir), count)
    base_p50, p50 = statistics.median(baseline), statistics.median(calls)
    print(f"bare host spawn sh -c '{COMMAND}' (baseline): p50 {base_p50:.2f} ms")
    print(f"bash tool call in a ready sandbox:          p50 {p50:.2f} ms  (n={count})")
    print(
        f"overhead p50: {p50 - base_p50:.2f} ms  ratio {p50 / base_p50:.1f}x  "
        "(budget: overhead <= 5 ms)"
    )


if __name__ == "__main__":
    asyncio.run(main())
