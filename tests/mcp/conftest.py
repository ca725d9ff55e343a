"""What the MCP tests need: the SDK (and a published server) installed for the sandbox's
Python, and helpers to put them in a conversation's sandbox and to count server processes."""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from burrow.sandbox.backend import ExecExit, ExecRequest, closing_exec
from tests.api.harness import RunningServer
from tests.conftest import unavailable

ROOT = Path(__file__).resolve().parents[2]
WORKBENCH = Path(__file__).with_name("workbench.py")
SANDBOX_PYTHON = "/usr/bin/python3"  # what the sandbox runs (it sees the host's /usr)
BUNDLE_DIR = "/tmp/mcp"  # inside the sandbox: tmpfs, out of the workspace's checkpoints
PUBLISHED = "mcp-server-time"  # a published MCP server from PyPI


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A tar.gz of the SDK, the published server and the workbench server, installed for
    the sandbox's Python with the project's own uv (from PyPI or uv's cache)."""
    uv = ROOT / ".uv" / "bin" / "uv"
    if not uv.exists() or not Path(SANDBOX_PYTHON).exists():
        unavailable(f"{uv} and {SANDBOX_PYTHON}")
    target = tmp_path_factory.mktemp("mcp-sdk") / "sdk"
    version = importlib.metadata.version("mcp")
    command = [str(uv), "pip", "install", "--quiet", "--target", str(target)]
    done = subprocess.run(
        [*command, "--python", SANDBOX_PYTHON, f"mcp=={version}", PUBLISHED],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        unavailable(f"installing mcp and {PUBLISHED} from PyPI ({done.stderr[-500:]})")
    shutil.copy(WORKBENCH, target / "workbench.py")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(target, arcname="sdk")
    return buffer.getvalue()


async def install(srv: RunningServer, cid: str, bundle: bytes) -> None:
    """Unpack the bundle at /tmp/mcp/sdk in the conversation's sandbox."""
    sandbox = await srv.services.runtime.sandboxes.get(cid)
    await sandbox.write_file(".bundle.tgz", bundle)
    script = f"mkdir -p {BUNDLE_DIR} && tar -xzf .bundle.tgz -C {BUNDLE_DIR} && rm .bundle.tgz"
    exit_event = None
    async with closing_exec(sandbox.exec(ExecRequest(["sh", "-c", script], timeout=120))) as ev:
        async for event in ev:
            if isinstance(event, ExecExit):
                exit_event = event
    assert exit_event is not None and exit_event.exit_code == 0


def in_sandbox(tag: str, *extra: str) -> dict[str, object]:
    """An mcp.json entry running the workbench in the sandbox; `tag` marks its processes."""
    return {
        "command": "python3",
        "args": [f"{BUNDLE_DIR}/sdk/workbench.py", "--tag", tag, *extra],
        "env": {"PYTHONPATH": f"{BUNDLE_DIR}/sdk"},
    }


def write_config(data_dir: Path, servers: dict[str, object]) -> None:
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = data_dir / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    path.chmod(0o600)


def processes_tagged(tag: str) -> list[int]:
    """Live processes (not zombies) on this machine whose command line carries `tag`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found
