"""Shared by the sandbox benchmarks: the baseline (bwrap starting Python with the sandbox's
namespaces) and production limits."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, pct, report
from burrow.sandbox import idmap
from burrow.sandbox.bwrap import find_setpriv
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.network import read_child_pid

__all__ = ["PRODUCTION_LIMITS", "bwrap_python_ms", "p50", "p90", "report"]

PRODUCTION_LIMITS = Limits()  # the defaults `burrow serve` uses


# The namespaces the local backend's sandbox gets (burrow/sandbox/bwrap.py).
SANDBOX_NAMESPACES = [
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-net",
    "--unshare-cgroup",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
]


async def bwrap_python_ms(bwrap: str) -> float:
    """bwrap with the sandbox's namespaces starting `python3 -S -c pass`: the least a
    sandbox whose agent is a Python process can cost (DESIGN.md section 7's baseline). On
    the sandbox's own mapping: under root, bwrap starts as the uid range's root (setpriv)
    and waits while the host writes its maps, as the backend does (idmap.py)."""
    ids = idmap.burrow_range()
    command = [bwrap, "--unshare-user", *SANDBOX_NAMESPACES]
    command += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    command += ["/usr/bin/python3", "-S", "-c", "pass"]  # the backend's default interpreter
    started = time.perf_counter()
    if ids is None:
        unmapped = [*command[:2], "--disable-userns", *command[2:]]
        process = await asyncio.create_subprocess_exec(*unmapped)
    else:
        info_read, info_write = os.pipe()
        block_read, block_write = os.pipe()
        mapped = [*command[:2], "--info-fd", str(info_write), "--userns-block-fd", str(block_read)]
        as_range = [find_setpriv(), f"--reuid={ids.root}", f"--regid={ids.root}", "--clear-groups"]
        process = await asyncio.create_subprocess_exec(
            *as_range, "--", *mapped, *command[2:], pass_fds=(info_write, block_read)
        )
        os.close(info_write)
        os.close(block_read)
        info = b""
        while b"}" not in info:
            info += await asyncio.to_thread(os.read, info_read, 4096)
        idmap.write_maps(read_child_pid(info), ids)
        os.write(block_write, b"1")
        os.close(block_write)
        os.close(info_read)
    if await process.wait() != 0:
        raise RuntimeError(f"the baseline failed: {' '.join(command)}")
    return (time.perf_counter() - started) * 1000


def p90(samples: list[float]) -> float:
    return pct(samples, 0.9)
