"""Local sandbox create -> ready (agent answering its handshake) vs bwrap with the same
namespaces starting `python3 -S -c pass` (the agent is a Python process).

    .venv/bin/python bench/sandbox_create.py [--count 30]

Two configurations: isolation only (namespaces, seccomp), and production (also cgroup
limits and the workspace disk image; the first create of a workspace also formats it).
Each with both network policies (DESIGN.md section 8: figures for `none` and `egress`; the
names without a network are `none`), and production with egress through a domain
allowlist (the proxy on the sandbox's loopback instead of slirp4netns).
Budget (DESIGN.md section 7): p50 <= 50 ms and <= 2x that baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from sandbox_common import PRODUCTION_LIMITS, bwrap_python_ms, p50, p90, report

from burrow.sandbox.allowlist import DomainAllowlist
from burrow.sandbox.backend import NetworkPolicy
from burrow.sandbox.bwrap import find_bwrap
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.local import LocalBackend
from burrow.sandbox.network import egress_unavailable

# (name, limits, network, allowlist); the names of `none` stay as they were (baseline.json).
CONFIGURATIONS: list[tuple[str, Limits | None, NetworkPolicy, str]] = [
    ("isolation only", None, "none", ""),
    ("production limits", PRODUCTION_LIMITS, "none", ""),
    ("isolation only, network egress", None, "egress", ""),
    ("production limits, network egress", PRODUCTION_LIMITS, "egress", ""),
    ("production limits, egress + allowlist", PRODUCTION_LIMITS, "egress", "registry.npmjs.org"),
]


async def create_ms(
    data_dir: Path,
    count: int,
    limits: Limits | None,
    bwrap: str,
    baseline: list[float],
    network: NetworkPolicy = "none",
    allow: str = "",
) -> list[float]:
    """`count` creates, each right after a baseline sample (appended to `baseline`), so a
    busy neighbour falls on both alike."""
    backend = LocalBackend(
        data_dir,
        limits=limits,
        network=network,
        allow_domains=DomainAllowlist.parse(allow) or None,
    )
    samples = []
    try:
        await backend.create("warm-up")  # first-run costs: page cache, .pyc files
        for index in range(count):
            baseline.append(await bwrap_python_ms(bwrap))
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
    for name, limits, network, allow in CONFIGURATIONS:
        if network == "egress" and not allow and egress_unavailable():
            print(f"skipped {name}: {egress_unavailable()}")
            continue
        baseline: list[float] = []
        with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
            samples = await create_ms(
                Path(data_dir), count, limits, bwrap, baseline, network, allow
            )
        report(
            f"create -> ready, {name} (p50; p90 {p90(samples):.1f} ms, n={count})",
            p50(samples),
            "ms",
            "bwrap, same namespaces, python3 -S -c pass, p50",
            p50(baseline),
            "p50 <= 50 ms, <= 2x",
        )


if __name__ == "__main__":
    asyncio.run(main())
