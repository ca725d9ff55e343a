"""Shared by the sandbox benchmarks: the baseline (a bare bwrap) and production limits."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, pct, report
from burrow.sandbox.cgroups import Limits

__all__ = ["PRODUCTION_LIMITS", "bare_bwrap_ms", "p50", "p90", "report"]

PRODUCTION_LIMITS = Limits()  # the defaults `burrow serve` uses


async def bare_bwrap_ms(bwrap: str) -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(bwrap, "--ro-bind", "/", "/", "true")
    await process.wait()
    return (time.perf_counter() - started) * 1000


def p90(samples: list[float]) -> float:
    return pct(samples, 0.9)
