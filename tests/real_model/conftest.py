"""A real model on 127.0.0.1: SmolLM2-135M-Instruct, served by `server.mjs` (llama.cpp
through node-llama-cpp) on an OpenAI-shaped endpoint. `make real-model` installs both."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from burrow.ports import free_port
from tests.conftest import unavailable

HERE = Path(__file__).resolve().parent
WEIGHTS = HERE / ".weights" / "SmolLM2-135M-Instruct.Q4_1.gguf"
NODE_MODULES = HERE / "node_modules"
MODEL = "smollm2-135m"


@dataclass
class RealModel:
    base_url: str  # ends in /v1, as OPENAI_BASE_URL
    log: Path
    process: subprocess.Popen[bytes]

    def requests(self) -> list[dict[str, Any]]:
        """Every answered request: the messages the model was sent and what it answered."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024


@contextlib.contextmanager
def real_model(tmp_path: Path, *flags: str) -> Iterator[RealModel]:
    """The model server, answering; `flags` go to server.mjs (--api-key K, ...)."""
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / ".installed").exists() or not WEIGHTS.exists():
        unavailable("the real model (node, and `make real-model`)")
    port = free_port()
    log = tmp_path / "model-requests.jsonl"
    argv = [node, str(HERE / "server.mjs"), "--model", str(WEIGHTS), "--port", str(port)]
    argv += ["--name", MODEL, "--threads", "1", "--log", str(log), *flags]
    # OpenMP's spin-wait starves a busy 2-core machine (the real-models issue measured a
    # collapse from ~30 to ~2 tokens/s); passive waiting costs nothing at one thread.
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    out = (tmp_path / "model-server.log").open("wb")
    process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the model server did not start (exit {process.poll()}): "
                    + (tmp_path / "model-server.log").read_text()[-2000:]
                )
            time.sleep(0.05)
        yield RealModel(f"{base}/v1", log, process)
    finally:
        process.kill()
        process.wait(10)
        out.close()
