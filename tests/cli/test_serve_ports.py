"""`burrow serve` on a port another program holds: one line saying which port and which
option chooses another, exit status 2, before the data directory is touched."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from burrow.ports import free_port


def serve(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BURROW_")}
    data = tmp_path / "data"
    cmd = [sys.executable, "-m", "burrow.cli", "serve", "--data-dir", str(data), *argv]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("which", ["api", "preview"])
def test_a_port_in_use_is_one_clear_line_and_exit_2(tmp_path: Path, which: str) -> None:
    held = socket.create_server(("127.0.0.1", 0))
    taken = held.getsockname()[1]
    other = free_port()
    ports = (taken, other) if which == "api" else (other, taken)
    with held:
        done = serve(tmp_path, "--port", str(ports[0]), "--preview-port", str(ports[1]))
    assert done.returncode == 2, done.stderr
    option = "--port (BURROW_PORT)" if which == "api" else "--preview-port (BURROW_PREVIEW_PORT)"
    assert f"127.0.0.1:{taken}" in done.stderr and option in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr) < 400, done.stderr
    # Refused before anything was opened: no database, no first-start admin password.
    assert not (tmp_path / "data").exists()
    assert "password" not in done.stdout
    # The API socket bound before the preview one failed is released again.
    if which == "preview":
        socket.create_server(("127.0.0.1", other)).close()


def test_an_address_this_machine_does_not_have_says_to_choose_another(tmp_path: Path) -> None:
    done = serve(tmp_path, "--host", "no-such-host.invalid", "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    assert "no such address" in done.stderr and "--host (BURROW_HOST)" in done.stderr
    assert "Traceback" not in done.stderr
