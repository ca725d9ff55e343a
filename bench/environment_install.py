"""`apt-get install -y` of a package the host does not have, in a fresh sandbox, vs the same
install in a bare bwrap sandbox over the same base (the environments issue: <= 1.5x).

    .venv/bin/python bench/environment_install.py [--count 5]

The package is built here with dpkg-deb (no network: the figure is the sandbox's, not a
mirror's): 200 files of 20 KiB and a postinst that adds a system user, as a daemon's
package does. Burrow's side is the local backend with production limits: a new sandbox,
the .deb written into its workspace, then the install timed from exec to exit. The
baseline is bwrap over the same base: the host's /usr, /etc and dpkg's database under
throwaway overlays (where the install writes), the rest of /var empty, as Burrow's base has
it (rootfs.py), and the same namespaces but no limits, idmap or guest; one sample right
before each of Burrow's, so a busy neighbour falls on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import tempfile
import time
from pathlib import Path

from sandbox_common import PRODUCTION_LIMITS, p50, report

from burrow.sandbox.backend import ExecExit, ExecRequest, closing_exec
from burrow.sandbox.bwrap import find_bwrap
from burrow.sandbox.local import LocalBackend

PACKAGE = "burrow-bench-tool"
# (apt makes its cache and log folders only where their parents are: a base with an
# empty /var has none, so both sides make them as a Dockerfile's first RUN would.)
INSTALL = (
    "mkdir -p /var/cache/apt/archives/partial /var/lib/apt/lists/partial /var/log/apt && "
    "apt-get install -y -q --no-install-recommends {deb} >/dev/null 2>&1"
)


def build_deb(folder: Path) -> Path:
    root = folder / PACKAGE
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {PACKAGE}\nVersion: 1.0\nArchitecture: all\n"
        "Maintainer: Burrow bench <bench@localhost>\nDescription: a package for a bench\n"
    )
    postinst = root / "DEBIAN" / "postinst"
    postinst.write_text("#!/bin/sh\nset -e\nuseradd --system --no-create-home burrowbench\n")
    postinst.chmod(0o755)
    share = root / "usr" / "share" / PACKAGE
    share.mkdir(parents=True)
    for index in range(200):
        (share / f"file{index:03}.dat").write_bytes(bytes([index % 256]) * (20 << 10))
    deb = folder / f"{PACKAGE}.deb"
    subprocess.run(
        ["dpkg-deb", "--build", "-Zgzip", str(root), str(deb)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return deb


async def bare_install_ms(bwrap: str, deb: Path) -> float:
    command = [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    command += ["--tmpfs", "/tmp", "--ro-bind", str(deb), "/tmp/bench.deb"]
    # Burrow's base (rootfs.py): /usr, /etc and dpkg's database of the host, the rest of
    # /var empty (no apt lists: an install from the mirrors begins with apt-get update).
    for path in ("/usr", "/etc"):
        command += ["--overlay-src", path, "--tmp-overlay", path]
    command += ["--tmpfs", "/var", "--overlay-src", "/var/lib/dpkg", "--tmp-overlay"]
    command += ["/var/lib/dpkg"]
    command += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]
    command += ["--die-with-parent", "/bin/sh", "-c", INSTALL.format(deb="/tmp/bench.deb")]
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(*command)
    if await process.wait() != 0:
        raise RuntimeError("the bare install failed: " + " ".join(command))
    return (time.perf_counter() - started) * 1000


async def burrow_install_ms(backend: LocalBackend, sandbox_id: str, data: bytes) -> float:
    sandbox = await backend.create(sandbox_id, network="none")
    try:
        await sandbox.write_file("bench.deb", data)
        check = f"{INSTALL.format(deb='/workspace/bench.deb')} && id burrowbench >/dev/null"
        request = ExecRequest(argv=["/bin/sh", "-c", check], timeout=120)
        started = time.perf_counter()
        code = None
        async with closing_exec(sandbox.exec(request)) as events:
            async for event in events:
                if isinstance(event, ExecExit):
                    code = event.exit_code
        elapsed = (time.perf_counter() - started) * 1000
        if code != 0:
            raise RuntimeError(f"the install in the sandbox exited {code}")
        return elapsed
    finally:
        await backend.destroy(sandbox_id)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=5)
    count = parser.parse_args().count
    bwrap = find_bwrap()
    with tempfile.TemporaryDirectory() as tmp:
        deb = build_deb(Path(tmp))
        data = deb.read_bytes()
        backend = LocalBackend(Path(tmp) / "data", limits=PRODUCTION_LIMITS, network="none")
        await backend.recover()
        bare, ours = [], []
        try:
            await burrow_install_ms(backend, "install-warm", data)  # caches, first boot
            for index in range(count):
                bare.append(await bare_install_ms(bwrap, deb))
                ours.append(await burrow_install_ms(backend, f"install-{index}", data))
        finally:
            await backend.close()
    report(
        f"apt-get install in a fresh sandbox (n={count})",
        p50(ours),
        "ms",
        "the same install in bare bwrap over the same base",
        p50(bare),
        "<= 1.5x",
    )


if __name__ == "__main__":
    asyncio.run(main())
