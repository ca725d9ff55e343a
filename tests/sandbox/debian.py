"""A Debian base built once per test process (a real mmdebstrap build, ~20-25 s on this
machine), shared by the tests of every module that asks for it: each test's backend sees
it in its own data directory through a link, as if it had built it."""

from __future__ import annotations

import asyncio
import atexit
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from burrow.sandbox import debian_base, idmap

SUITE = "bookworm"
PACKAGES: tuple[str, ...] = ()  # python3 (always there) and the apt variant: ~200 MB
KEY = debian_base.key(SUITE, PACKAGES)

_lock = threading.Lock()
_built: Path | None = None


def shared_base() -> Path:
    """The base's directory (`<key>`, holding `rootfs`), built on the first call."""
    global _built
    with _lock:
        if _built is None:
            ids = idmap.burrow_range()
            assert ids is not None, "a Debian base is built by a root server"
            assert not debian_base.unavailable(), debian_base.unavailable()
            scratch = Path(tempfile.mkdtemp(prefix="burrow-debian-base-"))
            atexit.register(shutil.rmtree, scratch, ignore_errors=True)
            directory = scratch / KEY
            log = bytearray()
            try:
                asyncio.run(debian_base.build(directory, SUITE, PACKAGES, ids, log.extend))
            except debian_base.BuildFailed as exc:
                sys.stderr.write(log.decode(errors="replace")[-4000:])
                raise AssertionError(exc.message) from None
            _built = directory
        return _built


def link_into(environments: Path) -> str:
    """The shared base, shown under a backend's environments directory; its key."""
    environments.mkdir(parents=True, exist_ok=True)
    (environments / KEY).symlink_to(shared_base())
    return KEY
