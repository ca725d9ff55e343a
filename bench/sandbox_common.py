"""Shared by the sandbox benchmarks: the baseline (a bare bwrap) and production limits."""

from __future__ import annotations

import asyncio
import statistics
import time

from burrow.sandbox.cgroups import Limits

PRODUCTION_LIMITS = Limits()  # the defaults `burrow serve` uses


async def bare_bwrap_ms(bwrap: str) -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(bwrap, "--ro-bind", "/", "/", "true")
    await process.wait()
    return (time.perf_counter() - started) * 1000


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def p90(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(int(0.9 * len(ordered)), len(ordered) - 1)]


def report(
    name: str, value: float, unit: str, baseline_name: str, baseline: float, budget: str
) -> None:
    ratio = value / baseline if baseline else float("inf")
    print(
        f"{name}: {value:.1f} {unit} | baseline {baseline_name}: {baseline:.1f} {unit} "
        f"| ratio {ratio:.2f}x | budget {budget}",
        flush=True,
    )
