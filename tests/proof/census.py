"""Count, from the host's own tables, what the sandboxes of one data directory hold.

Independent of Burrow's reaping code on purpose: mounts from /proc/self/mountinfo, loop
devices from /sys/block, cgroups by the naming rule (sha256 of the workspace's path,
16 hex digits, under `burrow/`), processes from those cgroups' member lists.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Census:
    processes: int
    mounts: int
    loops: int
    cgroups: int

    def __str__(self) -> str:
        return f"{self.processes}/{self.mounts}/{self.loops}/{self.cgroups}"

    @property
    def empty(self) -> bool:
        return not (self.processes or self.mounts or self.loops or self.cgroups)


def take(data_dir: Path) -> Census:
    """Mounts and loop devices count the workspaces' disks and the writable roots' layer
    disks (`layers/`) alike."""
    workspaces = (data_dir / "workspaces").resolve()
    folders = (workspaces, (data_dir / "layers").resolve())
    mounts = 0
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = line.split(" ")[4].replace("\\040", " ")
        if Path(target).parent in folders:
            mounts += 1
    loops = 0
    for entry in Path("/sys/block").iterdir():
        backing = entry / "loop" / "backing_file"
        if entry.name.startswith("loop") and backing.exists():
            try:
                if backing.read_text().startswith(tuple(f"{f}/" for f in folders)):
                    loops += 1
            except OSError:
                pass  # detached while we looked
    processes = cgroups = 0
    for workspace in workspaces.iterdir() if workspaces.exists() else []:
        if not workspace.is_dir():
            continue
        name = hashlib.sha256(str(workspace).encode()).hexdigest()[:16]
        dirs = [d for d in _cgroup_dirs(name) if d.is_dir()]
        if dirs:
            cgroups += 1
            processes += _members(dirs)
    return Census(processes, mounts, loops, cgroups)


def _cgroup_dirs(name: str) -> list[Path]:
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT / "burrow" / name]
    return [CGROUP_ROOT / c / "burrow" / name for c in ("memory", "pids", "cpu")]


def _members(dirs: list[Path]) -> int:
    pids: set[str] = set()
    for d in dirs:
        try:
            pids |= set((d / "cgroup.procs").read_text().split())
        except OSError:
            pass
    return len(pids)
