"""Where bwrap finds what it binds, when it runs as the sandbox's own unprivileged uid.

bwrap resolves every bind source by path with the sandbox's credentials (idmap.py: the
range's root, no capability over host files), and the data directory sits under paths
only the host's root may pass (`/root/.local/share/burrow`, 0700 directories). So the
backend's runtime directory is the stage: owned by root, group the range, mode 0710 —
the sandbox's uid may pass through it and nobody else may — holding the guest's copy,
the resolver file, and, for a sandbox's boot only, its workspace bound under `stage/`.
Once bwrap has set up its mount namespace (the guest answered), the stage's bind is
detached: the sandbox keeps its own mount, the host path is empty again. A server
killed mid-boot leaves the bind behind; the next one detaches it before it removes the
old runtime directory (leftovers.reap_runtime_dir).

Guest sockets stay 0600: the range's uid passes through the directory but cannot
connect to another sandbox's guest.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from burrow.sandbox import mounts
from burrow.sandbox.idmap import IdRange

PASSABLE = 0o710


def open_to(runtime_dir: Path, ids: IdRange) -> None:
    """Let the range's gid pass through the runtime directory (and no one else)."""
    os.chown(runtime_dir, 0, ids.root)
    os.chmod(runtime_dir, PASSABLE)


class Stage:
    """Bind points for workspaces under `<runtime dir>/stage`."""

    def __init__(self, runtime_dir: Path, ids: IdRange) -> None:
        self.root = runtime_dir / "stage"
        self.ids = ids

    def path_for(self, sandbox_id: str) -> Path:
        return self.root / hashlib.sha256(sandbox_id.encode()).hexdigest()[:16]

    def root_for(self, sandbox_id: str) -> Path:
        """Where the sandbox's writable root (rootfs.py) is assembled for its boot."""
        self.root.mkdir(mode=PASSABLE, exist_ok=True)
        os.chown(self.root, 0, self.ids.root)
        return self.path_for(sandbox_id).with_suffix(".root")

    def bind(self, sandbox_id: str, workspace: Path) -> Path:
        """Bind the workspace where bwrap will look for it; returns that path."""
        self.root.mkdir(mode=PASSABLE, exist_ok=True)
        os.chown(self.root, 0, self.ids.root)
        target = self.path_for(sandbox_id)
        self.release(sandbox_id)  # a bind of an earlier boot that failed half-way
        target.mkdir(mode=0o700, exist_ok=True)
        mounts.bind(workspace, target)
        return target

    def release(self, sandbox_id: str) -> None:
        """Detach the boot's binds and root (the sandbox's own mounts of them stay)."""
        for target in (self.path_for(sandbox_id), self.path_for(sandbox_id).with_suffix(".root")):
            while True:  # until EINVAL (nothing mounted there) or ENOENT
                try:
                    mounts.detach(str(target))
                except OSError:
                    break
            with contextlib.suppress(OSError):
                target.rmdir()
