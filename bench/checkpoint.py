"""Workspace checkpoints cost what changed, not what exists (issues 11 and 22). Each figure
is a take's p50 against a baseline measured in the same sandbox in the same run:

- a small workspace (20 files, 1 changed), against a bare exec in the sandbox (`true`): the
  least anything there costs;
- 2,000 and 20,000 files (10 changed), each against a walk that stats every file of the same
  tree (`find -size`): the least a take can cost when nothing tells it what changed. Flat
  with the number of unchanged files is the same ratio at both sizes;
- 20,000 files / 200 MB (10 changed): the take, and the diff against the checkpoint before,
  against `cp -a` of the same tree — the naive way to snapshot it.

A take is what a run waits for: the workspace captured into git's index and its tree. The
commit and the store's accounting (`seal`, made when the run ends) are timed on their own,
against the same bare exec.

Takes are measured as a run's start finds the workspace: checkpointed once before, more than
a second ago (past the racy second, when files are re-read whatever their stat says). With
production limits under a root server, the workspace's disk is watched (sandbox/watch.py):
a take hands git only what the watch names, and walks only when it names nothing it can
stand behind (the first take of a boot, and the one after the first take's own flood of
new objects, which the first round here is).

    .venv/bin/python bench/checkpoint.py [--count 5] [--files 20000] [--mb 200]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
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
STAT_WALK = "find . -size +1000000000k"  # stats every file and prints none


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


async def timed(work: Awaitable[object]) -> float:
    started = time.perf_counter()
    await work
    return (time.perf_counter() - started) * 1000


@dataclass
class Samples:
    takes: list[float] = field(default_factory=list)
    seals: list[float] = field(default_factory=list)
    diffs: list[float] = field(default_factory=list)
    walks: list[float] = field(default_factory=list)  # STAT_WALK of the same tree
    bare: list[float] = field(default_factory=list)  # `true` in the same sandbox
    copies: list[float] = field(default_factory=list)  # `cp -a` of the tree, if asked


async def measure(
    backend: LocalBackend, files: int, mb: int, changed: int, count: int, copy: bool = False
) -> Samples:
    sandbox = await backend.create(f"checkpoints-{files}")
    await sh(sandbox, MAKE_TREE, str(files), str(mb * 1024 * 1024 // files))
    await sh(sandbox, "mkdir -p .burrow/outputs")
    store = Checkpoints(lambda _cid: asyncio.sleep(0, sandbox))
    previous = (await store.take("bench", None)).id  # the first takes everything once
    await store.seal("bench")
    await sh(sandbox, "sleep 1.1")
    samples = Samples()
    for round_ in range(count):
        # Spread over the tree, whatever its size (MAKE_TREE puts 100 files in a folder).
        spread = [i * max(1, files // changed) for i in range(changed)]
        paths = " ".join(f"src/d{n // 100:03d}/f{n:05d}.txt" for n in spread)
        await sh(sandbox, f'for f in {paths}; do echo "round {round_}" >> "$f"; done')
        started = time.perf_counter()
        taken = await store.take("bench", None)
        samples.takes.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await store.seal("bench")
        samples.seals.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        diff = await store.diff("bench", previous, taken.id)
        samples.diffs.append((time.perf_counter() - started) * 1000)
        assert len(diff.files) == changed, [f.path for f in diff.files]
        previous = taken.id
        samples.walks.append(await timed(sh(sandbox, STAT_WALK)))
        samples.bare.append(await timed(sh(sandbox, "true")))
    for _ in range(count if copy else 0):
        # On the workspace's own disk, where checkpoints are kept (outputs/ is left out of
        # checkpoints, so the copy never enters one). After the takes: its 20,000 new files
        # would fill the workspace watch's queue, and the take after it walk.
        samples.copies.append(await timed(sh(sandbox, "cp -a src .burrow/outputs/copy")))
        await sh(sandbox, "rm -rf .burrow/outputs/copy")
    await backend.destroy(sandbox.id)
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--mb", type=int, default=200)
    args = parser.parse_args()
    n, few = args.count, max(100, args.files // 10)
    with tempfile.TemporaryDirectory(prefix="burrow-bench-") as data_dir:
        backend = LocalBackend(Path(data_dir), limits=PRODUCTION_LIMITS)
        try:
            small = await measure(backend, 20, 1, 1, count=5 * n)
            tenth = await measure(backend, few, max(1, args.mb // 10), 10, count=n)
            large = await measure(backend, args.files, args.mb, 10, count=n, copy=True)
        finally:
            await backend.close()
    walk = "a walk that stats every file of the tree (find -size), p50"
    report(
        f"checkpoint take, small workspace (20 files, 1 changed, p50, n={5 * n})",
        p50(small.takes), "ms", "a bare exec in the same sandbox (true), p50", p50(small.bare),
        "p50 <= 5 ms",
    )  # fmt: skip
    report(
        f"checkpoint seal, after the run (20 files, 1 changed, p50, n={5 * n})",
        p50(small.seals), "ms", "a bare exec in the same sandbox (true), p50", p50(small.bare),
        "off the run's path",
    )  # fmt: skip
    for files, mb, samples in ((few, args.mb // 10, tenth), (args.files, args.mb, large)):
        report(
            f"checkpoint take over a stat walk, {files:,} files "
            f"({files:,} files / {mb} MB, 10 changed, p50, n={n})",
            p50(samples.takes), "ms", walk, p50(samples.walks),
            "flat with the unchanged files: below 1x at 20,000",
        )  # fmt: skip
    tree = f"{args.files:,} files / {args.mb} MB, 10 changed"
    report(
        f"checkpoint take ({tree}, p50, n={n})",
        p50(large.takes), "ms", "cp -a of the same tree, p50", p50(large.copies), "p50 <= 30 ms",
    )  # fmt: skip
    report(
        f"checkpoint diff against the one before ({tree}, p50, n={n})",
        p50(large.diffs), "ms", "cp -a of the same tree, p50", p50(large.copies), "p50 <= 200 ms",
    )  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
