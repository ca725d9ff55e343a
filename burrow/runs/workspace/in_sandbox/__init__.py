"""Scripts that run inside a conversation's sandbox (`python3 -I -c <source>`), never on the
host: whatever they open — archives, the workspace's files and links — is the model's or the
uploader's to shape. Standard library only; `source(name)` is what the host sends."""

from __future__ import annotations

from pathlib import Path


def source(name: str) -> str:
    return (Path(__file__).parent / f"{name}.py").read_text()
