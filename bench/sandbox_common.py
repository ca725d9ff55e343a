"""Shared by the sandbox benchmarks: the baseline (bwrap starting Python with the sandbox's
namespaces) and production limits."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, pct, report
from burrow.sandbox.cgroups import Limits

__all__ = ["PRODUCTION_LIMITS", "bwrap_python_ms", "p50", "p90", "report"]

PRODUCTION_LIMITS = Limits()  # the defaults `burrow serve` uses


# The namespaces the local backend's sandbox gets (burrow/sandbox/bwrap.py).
SANDBOX_NAMESPACES = [
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-net",
    "--unshare-cgroup",
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
]


async def bwrap_python_ms(bwrap: str) -> float:
    """bwrap with the sandbox's namespaces starting `python3 -S -c pass`: the least a
    sandbox whose agent is a Python process can cost (DESIGN.md section 7's baseline)."""
    argv = [bwrap, *SANDBOX_NAMESPACES, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    started = time.perf_counter()
    # The interpreter the local backend runs its agent with by default.
    process = await asyncio.create_subprocess_exec(*argv, "/usr/bin/python3", "-S", "-c", "pass")
    if await process.wait() != 0:
        raise RuntimeError(f"the baseline failed: {' '.join(argv)}")
    return (time.perf_counter() - started) * 1000


def p90(samples: list[float]) -> float:
    return pct(samples, 0.9)
