"""Workspace checkpoints at scale (issue 11): a workspace of 20,000 files / 200 MB where 10
files changed since the last checkpoint. Figures: taking the checkpoint (p50) and diffing it
against the one before (p50), each against `cp -a` of the same tree in the same sandbox —
the naive way to snapshot it.

    .venv/bin/python bench/checkpoint.py [--count 5] [--files 20000] [--mb 200]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from sandbox_common import PRODUCTION_LIMITS, p50, report

from burrow.runs.workspace.checkpoints import Checkpoints
from burrow.sandbox.backend import ExecChunk, ExecExit, ExecRequest, Sandbox
from burrow.sandbox.local import LocalBackend

MAKE_TREE = """
import os, sys
files, size = int(sys.argv[1]), int(sys.argv[2])
block = os.urandom(size)
for i in range(files):
    folder = f"src/d{i // 100:03d}"
    os.makedirs(folder, exist_ok=True)
    with open(f"{folder}/f{i:05d}.txt", "wb") as out:
        out.write(block[i % 97:] + block[: i % 97])
"""


async def sh(sandbox: Sandbox, script: str, *args: str, timeout: float = 600) -> str:
    argv = ["sh", "-c", script, "sh", *args] if not script.startswith("\nimport") else [
        "python3", "-c", script, *args]  # fmt: skip
    out = bytearray()
    async for event in sandbox.exec(ExecRequest(argv=argv, timeout=timeout)):
        if isinstance(event, ExecChunk):
            out += event.data
        elif isinstance(event, ExecExit) and event.exit_code != 0:
            raise RuntimeError(f"{argv[:3]} failed ({event.exit_code}): {out[-500:]!r}")
    return out.decode(errors="replace")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--mb", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
        backend = LocalBackend(Path(data_dir), limits=PRODUCTION_LIMITS)
        sandbox = await backend.create("checkpoints")
        try:
            size = args.mb * 1024 * 1024 // args.files
            await sh(sandbox, MAKE_TREE, str(args.files), str(size))
            await sh(sandbox, "mkdir -p .burrow/outputs")
            store = Checkpoints(lambda _cid: asyncio.sleep(0, sandbox))
            first = await store.take("bench", None)  # the first takes everything once
            takes, diffs, copies = [], [], []
            previous = first.id
            for round_ in range(args.count):
                changed = " ".join(f"src/d{i:03d}/f{i * 100:05d}.txt" for i in range(10))
                await sh(sandbox, f'for f in {changed}; do echo "round {round_}" >> "$f"; done')
                started = time.perf_counter()
                taken = await store.take("bench", None)
                takes.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                diff = await store.diff("bench", previous, taken.id)
                diffs.append((time.perf_counter() - started) * 1000)
                assert len(diff.files) == 10, [f.path for f in diff.files]
                previous = taken.id
                started = time.perf_counter()
                # On the workspace's own disk, where checkpoints are kept (outputs/ is left
                # out of checkpoints, so the copy never enters one).
                await sh(sandbox, "cp -a src .burrow/outputs/copy")
                copies.append((time.perf_counter() - started) * 1000)
                await sh(sandbox, "rm -rf .burrow/outputs/copy")
        finally:
            await backend.close()
    tree = f"{args.files:,} files / {args.mb} MB, 10 changed"
    report(
        f"checkpoint take ({tree}, p50, n={args.count})",
        p50(takes), "ms", "cp -a of the same tree, p50", p50(copies), "p50 <= 300 ms",
    )  # fmt: skip
    report(
        f"checkpoint diff against the one before ({tree}, p50, n={args.count})",
        p50(diffs), "ms", "cp -a of the same tree, p50", p50(copies), "p50 <= 200 ms",
    )  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
