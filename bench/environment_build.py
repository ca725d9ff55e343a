"""A cached rebuild of an unchanged environment: no setup runs, and it is ready within 2x a
sandbox create (the environments issue), measured in the same run.

    .venv/bin/python bench/environment_build.py [--count 10]

An environment (a setup script that installs a file and sleeps a second, so a rebuild that
ran it could not hide) is built once. Then, `count` times, a new `Environments` over the
same definitions and backend (as after a server restart) is given the same definition and
asked for its build (`key_for`, what a new conversation waits on): timed from the put to
the key, with the build's log checked empty (nothing ran). The baseline, one sample beside
each: a sandbox create -> ready and its destroy on the same backend (production limits).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from sandbox_common import PRODUCTION_LIMITS, p50, report

from burrow.runs.workspace.environments import Environments, EnvironmentSpec, JsonDefinitions
from burrow.sandbox.local import LocalBackend

SPEC = EnvironmentSpec("bench", setup="echo built > /opt/bench-built && sleep 1\n")


async def cached_ms(backend: LocalBackend, definitions: Path) -> float:
    environments = Environments(JsonDefinitions(definitions), backend)
    started = time.perf_counter()
    await environments.put(SPEC)
    await environments.key_for(SPEC.name)
    elapsed = (time.perf_counter() - started) * 1000
    build = environments.build_of(SPEC.name)
    assert build is not None and not build.log, "a cached rebuild ran the setup"
    await environments.close()
    return elapsed


async def create_ms(backend: LocalBackend, sandbox_id: str) -> float:
    started = time.perf_counter()
    await backend.create(sandbox_id, network="none")
    elapsed = (time.perf_counter() - started) * 1000
    await backend.destroy(sandbox_id)
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=10)
    count = parser.parse_args().count
    with tempfile.TemporaryDirectory() as tmp:
        backend = LocalBackend(Path(tmp) / "data", limits=PRODUCTION_LIMITS, network="none")
        await backend.recover()
        definitions = Path(tmp) / "environments.json"
        try:
            first = Environments(JsonDefinitions(definitions), backend)
            started = time.perf_counter()
            await first.put(SPEC)
            await first.key_for(SPEC.name)
            built = time.perf_counter() - started
            await first.close()
            await create_ms(backend, "warm")
            cached, created = [], []
            for index in range(count):
                created.append(await create_ms(backend, f"create-{index}"))
                cached.append(await cached_ms(backend, definitions))
        finally:
            await backend.close()
    report(
        f"cached rebuild of an unchanged environment (first build {built:.1f} s, n={count})",
        p50(cached),
        "ms",
        "sandbox create -> ready, production limits",
        p50(created),
        "<= 2x",
    )


if __name__ == "__main__":
    asyncio.run(main())
