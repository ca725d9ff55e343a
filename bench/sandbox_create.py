"""Local sandbox create -> ready (agent answering its handshake) vs bwrap with the same
namespaces starting `python3 -S -c pass` (the agent is a Python process).

    .venv/bin/python bench/sandbox_create.py [--count 30]

Two configurations: isolation only (namespaces, seccomp), and production (also cgroup
limits and the workspace disk image; the first create of a workspace also formats it).
Each with both network policies (DESIGN.md section 8: figures for `none` and `egress`; the
names without a network are `none`), and production with egress through a domain
allowlist (the proxy on the sandbox's loopback instead of slirp4netns). Every sandbox
has its writable root (rootfs.py), as `burrow serve` gives them; one configuration shows
the read-only root beside it.
Budget (DESIGN.md section 7): p50 <= 50 ms and <= 2x that baseline.

Then environments (issue 24): create -> ready of a sandbox standing on a built
environment's layer, against create with the host's system alone, interleaved in the same
backend (budget <= 1.5x).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from sandbox_common import PRODUCTION_LIMITS, bwrap_python_ms, p50, p90, report

from burrow.sandbox.allowlist import DomainAllowlist
from burrow.sandbox.backend import ExecRequest, NetworkPolicy
from burrow.sandbox.bwrap import find_bwrap
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.local import LocalBackend, RootMode
from burrow.sandbox.network import egress_unavailable

# (name, limits, network, allowlist, root); the names of `none` stay as they were
# (baseline.json).
CONFIGURATIONS: list[tuple[str, Limits | None, NetworkPolicy, str, RootMode]] = [
    ("isolation only", None, "none", "", "writable"),
    ("production limits", PRODUCTION_LIMITS, "none", "", "writable"),
    ("production limits, read-only root", PRODUCTION_LIMITS, "none", "", "read-only"),
    ("isolation only, network egress", None, "egress", "", "writable"),
    ("production limits, network egress", PRODUCTION_LIMITS, "egress", "", "writable"),
    (
        "production limits, egress + allowlist",
        PRODUCTION_LIMITS,
        "egress",
        "registry.npmjs.org",
        "writable",
    ),
]
ENVIRONMENT_KEY = "bench0123456789a"
# What the environment's build leaves: a tool in /usr/local, a config in /etc, a user.
ENVIRONMENT_SETUP = (
    "mkdir -p /usr/local/lib/tool && head -c 4000000 /dev/urandom > /usr/local/lib/tool/data"
    " && echo 'x=1' > /etc/tool.conf && useradd -m builder"
)


async def create_ms(
    data_dir: Path,
    count: int,
    limits: Limits | None,
    bwrap: str,
    baseline: list[float],
    network: NetworkPolicy = "none",
    allow: str = "",
    root: RootMode = "writable",
) -> list[float]:
    """`count` creates, each right after a baseline sample (appended to `baseline`), so a
    busy neighbour falls on both alike."""
    backend = LocalBackend(
        data_dir,
        limits=limits,
        network=network,
        allow_domains=DomainAllowlist.parse(allow) or None,
        root=root,
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


async def environment_ms(data_dir: Path, count: int) -> tuple[list[float], list[float]]:
    """Creates on a built environment and on the host's system alone, interleaved."""
    backend = LocalBackend(data_dir, limits=PRODUCTION_LIMITS)
    on_environment, on_host = [], []
    try:
        build = await backend.create("build")
        async for _ in build.exec(ExecRequest(argv=["/bin/bash", "-c", ENVIRONMENT_SETUP])):
            pass
        await build.stop()
        await backend.save_environment("build", ENVIRONMENT_KEY)
        await backend.create("warm-up", environment=ENVIRONMENT_KEY)
        for index in range(count):
            started = time.perf_counter()
            await backend.create(f"host-{index}")
            on_host.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await backend.create(f"env-{index}", environment=ENVIRONMENT_KEY)
            on_environment.append((time.perf_counter() - started) * 1000)
    finally:
        await backend.close()
    return on_environment, on_host


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=30)
    count = parser.parse_args().count
    bwrap = find_bwrap()
    for name, limits, network, allow, root in CONFIGURATIONS:
        if network == "egress" and not allow and egress_unavailable():
            print(f"skipped {name}: {egress_unavailable()}")
            continue
        baseline: list[float] = []
        with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
            samples = await create_ms(
                Path(data_dir), count, limits, bwrap, baseline, network, allow, root
            )
        report(
            f"create -> ready, {name} (p50; p90 {p90(samples):.1f} ms, n={count})",
            p50(samples),
            "ms",
            "bwrap, same namespaces, python3 -S -c pass, p50",
            p50(baseline),
            "p50 <= 50 ms, <= 2x",
        )
    with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
        on_environment, on_host = await environment_ms(Path(data_dir), count)
    report(
        f"create -> ready on a built environment, production limits "
        f"(p50; p90 {p90(on_environment):.1f} ms, n={count})",
        p50(on_environment),
        "ms",
        "create on the host's system alone, same backend, interleaved, p50",
        p50(on_host),
        "<= 1.5x",
    )


if __name__ == "__main__":
    asyncio.run(main())
