"""Resource limits of a sandbox as cgroups that Burrow creates, and only those.

Each sandbox gets `<controller root>/burrow/<id>`: on cgroup v1 one directory per
controller (memory, pids, cpu: what this kind of host mounts separately), on v2 one
directory in the unified tree. bwrap is moved into it before it executes (so every process
of the sandbox, the agent included, is born inside), and the directories are removed when
the sandbox stops. Nothing outside `burrow/` is ever written.
"""

from __future__ import annotations

import contextlib
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

    def procs_files(self) -> list[str]:
        """`cgroup.procs` of each directory: a process writes its pid there to join."""
        return [str(path / "cgroup.procs") for path in self.dirs.values()]

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


def joining_command(procs_files: list[str], argv: list[str], gate_fd: int | None) -> list[str]:
    """`argv` run by a shell that first moves itself into the cgroups, then execs it: no
    process of the sandbox starts outside them. The first move into a cgroup costs the
    kernel an RCU grace period (~15 ms), so the shell does it while the host prepares the
    rest, and waits for a line on `gate_fd` (if given) before it execs, with an empty
    environment (`exec -c`: bash's own PWD and SHLVL would show the server's working
    directory in the sandbox's /proc/1/environ). (A preexec_fn would also force a full
    fork of the server, ~20 ms; a shell spawns in ~1 ms.)"""
    script = (
        'g=$1; shift; for f in "$@"; do [ "$f" = -- ] && break; echo 0 > "$f" || exit 125; done; '
        'while [ "$1" != -- ]; do shift; done; shift; '
        'if [ "$g" != - ]; then read -r _ <&"$g" || exit 125; eval "exec $g<&-"; fi; '
        'exec -c -a "${1##*/}" "$@"'
    )
    gate = "-" if gate_fd is None else str(gate_fd)
    # bash, not sh: dash redirects only fds 0-9
    return ["/bin/bash", "-c", script, "burrow-cgroup", gate, *procs_files, "--", *argv]


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
