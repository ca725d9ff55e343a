"""Tightening the data directory when this user cannot change a file's mode."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
ROOT = Path(__file__).resolve().parents[2]


def test_a_file_this_user_cannot_tighten_is_named_with_what_to_do() -> None:
    with tempfile.TemporaryDirectory(prefix="burrow-datadir-") as parent:
        os.chmod(parent, 0o755)  # nobody must reach the data directory (tmp_path is 0700)
        tighten_as_nobody(Path(parent) / "data")


def tighten_as_nobody(data: Path) -> None:
    data.mkdir(mode=0o755)
    os.chown(data, 65534, 65534)  # the server's user (nobody) owns the directory...
    foreign = data / "copied.db"
    foreign.write_text("x")  # ...but not this file, left 0644 by a copy as root
    foreign.chmod(0o644)
    prepare = (
        "import sys; from pathlib import Path; from burrow.store.datadir import prepare; "
        "prepare(Path(sys.argv[1]))"
    )
    result = subprocess.run(
        [*NOBODY, sys.executable, "-c", prepare, str(data)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr  # the server still starts
    assert oct(data.stat().st_mode & 0o777) == oct(0o700)
    assert "1 path(s) in the data directory stay readable by other users" in result.stderr
    assert f"run `chmod go-rwx` on them as their owner: {foreign}" in result.stderr
