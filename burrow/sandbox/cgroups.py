"""Resource limits of a sandbox as cgroups that Burrow creates, and only those.

Each sandbox gets `<controller root>/burrow/<id>`: on cgroup v1 one directory per
controller (memory, pids, cpu: what this kind of host mounts separately), on v2 one
directory in the unified tree. bwrap is moved into it before it executes (so every process
of the sandbox, the guest included, is born inside), and the directories are removed when
the sandbox stops. Nothing outside `burrow/` is ever written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from burrow.sandbox.backend import ErrorCode, SandboxError

CGROUP_ROOT = Path("/sys/fs/cgroup")
PARENT = "burrow"
V1_CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use; 0 means no limit of that kind."""

    memory_mb: int = 1024
    pids: int = 512
    cpus: float = 1.0  # CPU time per wall second (a quota), e.g. 0.5 or 2
    cpu_weight: int = 100  # relative share under contention (v2 weight; v1 shares = x10.24)
    disk_mb: int = 2048  # the workspace's size (an ext4 image; see workspace_image.py)
    tmp_mb: int = 256  # the private /tmp (tmpfs, also counted in memory)


@dataclass(frozen=True)
class Usage:
    oom_kills: int
    pids_refused: int


class SandboxCgroup:
    """The cgroup directories of one sandbox."""

    def __init__(self, sandbox_id: str, limits: Limits, root: Path = CGROUP_ROOT) -> None:
        self.limits = limits
        self.v2 = _v2_has_controllers(root)
        if self.v2:
            self.dirs = {"unified": root / PARENT / sandbox_id}
        else:
            self.dirs = {c: root / c / PARENT / sandbox_id for c in V1_CONTROLLERS}

    def create(self) -> None:
        """Make the directories and write the limits; BOOT_FAILED with the reason if it fails."""
        try:
            for path in self.dirs.values():
                if self.v2 and not path.parent.exists():
                    path.parent.mkdir()
                    (path.parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
                path.mkdir(parents=True, exist_ok=True)
            self._write_limits()
        except OSError as exc:
            self.remove()
            raise SandboxError(
                ErrorCode.BOOT_FAILED,
                f"Could not set the sandbox's resource limits in {exc.filename}: "
                f"{exc.strerror}. The local backend needs write access to cgroups (run as "
                "root or delegate a cgroup subtree), or set BURROW_SANDBOX_LIMITS=false.",
            ) from None

    def _write_limits(self) -> None:
        limits = self.limits
        memory = limits.memory_mb << 20
        if self.v2:
            d = self.dirs["unified"]
            if memory:
                _write(d / "memory.max", memory)
                _write(d / "memory.swap.max", 0)
            if limits.pids:
                _write(d / "pids.max", limits.pids)
            if limits.cpus:
                _write(d / "cpu.max", f"{int(limits.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
            _write(d / "cpu.weight", limits.cpu_weight)
            return
        if memory:
            _write(self.dirs["memory"] / "memory.limit_in_bytes", memory)
            with contextlib.suppress(OSError):  # only with swap accounting
                _write(self.dirs["memory"] / "memory.memsw.limit_in_bytes", memory)
        if limits.pids:
            _write(self.dirs["pids"] / "pids.max", limits.pids)
        if limits.cpus:
            _write(self.dirs["cpu"] / "cpu.cfs_period_us", CPU_PERIOD_US)
            _write(self.dirs["cpu"] / "cpu.cfs_quota_us", int(limits.cpus * CPU_PERIOD_US))
        _write(self.dirs["cpu"] / "cpu.shares", max(2, limits.cpu_weight * 1024 // 100))

    def exists(self) -> bool:
        return any(path.is_dir() for path in self.dirs.values())

    def procs_files(self) -> list[str]:
        """`cgroup.procs` of each directory: a process writes its pid there to join."""
        return [str(path / "cgroup.procs") for path in self.dirs.values()]

    def join(self, pid: int) -> None:
        """Move `pid` (the launcher, waiting at its gate) into the cgroups, before it
        execs bwrap: no process of the sandbox starts outside them. The host does it, as
        the launcher already runs as the sandbox's unprivileged uid. The first move into a
        cgroup costs the kernel an RCU grace period (~15 ms): call it in a thread, beside
        the rest of the boot's preparation."""
        try:
            for procs in self.procs_files():
                _write(Path(procs), pid)
        except OSError as exc:
            raise SandboxError(
                ErrorCode.BOOT_FAILED,
                f"Could not move the sandbox into its cgroup ({exc.filename}): {exc.strerror}.",
            ) from None

    def usage(self) -> Usage:
        if self.v2:
            d = self.dirs["unified"]
            return Usage(
                _counter(d / "memory.events", "oom_kill"), _counter(d / "pids.events", "max")
            )
        return Usage(
            _counter(self.dirs["memory"] / "memory.oom_control", "oom_kill"),
            _counter(self.dirs["pids"] / "pids.events", "max"),
        )

    def pids(self) -> list[int]:
        """Every process in the sandbox (from the pid-accounting directory)."""
        path = self.dirs["unified" if self.v2 else "pids"] / "cgroup.procs"
        try:
            return [int(line) for line in path.read_text().split()]
        except OSError:
            return []

    def kill_and_remove(self) -> None:
        """SIGKILL whatever is still in the cgroups, then remove them. The pid namespace's
        end normally leaves nothing; this is the host's own sweep, not the sandbox's word."""
        if self.v2 and (self.dirs["unified"] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.dirs["unified"] / "cgroup.kill", 1)
        else:
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        self.remove()

    def remove(self) -> None:
        """Remove the directories once their processes are gone (they die asynchronously)."""
        for path in self.dirs.values():
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def name_for(workspace: Path) -> str:
    """A sandbox's cgroup name: a hash of its workspace's host path, unique per data
    directory too, so two servers (or test runs) on one host never share a cgroup."""
    return hashlib.sha256(str(workspace.resolve()).encode()).hexdigest()[:16]


def _v2_has_controllers(root: Path) -> bool:
    try:
        available = (root / "cgroup.controllers").read_text().split()
    except OSError:
        return False
    return {"memory", "pids"} <= set(available)


def _write(path: Path, value: object) -> None:
    path.write_text(str(value))


def _counter(path: Path, name: str) -> int:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0
