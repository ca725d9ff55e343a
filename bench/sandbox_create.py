"""Local sandbox create -> ready (agent answering its handshake) vs a bare `bwrap true`.

    .venv/bin/python bench/sandbox_create.py [--count 30]

Budget (DESIGN.md section 7): p50 <= 50 ms and <= 5x a bare `bwrap --ro-bind / / true`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from burrow.sandbox.bwrap import find_bwrap
from burrow.sandbox.local import LocalBackend


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)]


async def bare_bwrap_ms(bwrap: str, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(bwrap, "--ro-bind", "/", "/", "true")
        await process.wait()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def create_ms(data_dir: Path, count: int) -> list[float]:
    backend = LocalBackend(data_dir)
    samples = []
    try:
        await backend.create("warm-up")  # first-run costs: page cache, .pyc files
        for index in range(count):
            started = time.perf_counter()
            await backend.create(f"bench-{index}")
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        await backend.close()
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=30)
    count = parser.parse_args().count
    bwrap = find_bwrap()
    baseline = await bare_bwrap_ms(bwrap, count)
    with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
        created = await create_ms(Path(data_dir), count)
    base_p50 = statistics.median(baseline)
    p50, p90 = statistics.median(created), percentile(created, 0.9)
    print(f"bare bwrap true (baseline): p50 {base_p50:.1f} ms  ({bwrap})")
    print(f"sandbox create -> ready:    p50 {p50:.1f} ms  p90 {p90:.1f} ms  (n={count})")
    print(f"ratio p50 / baseline p50:   {p50 / base_p50:.1f}x  (budget: p50 <= 50 ms, <= 5x)")


if __name__ == "__main__":
    asyncio.run(main())
