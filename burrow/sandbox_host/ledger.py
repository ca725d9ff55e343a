"""The host's record of its sandboxes on disk, so a restarted host still knows them.

One JSON file in the data directory (0600: it holds the sandboxes' access tokens), replaced
whole on every change (write, then rename: a crash leaves the old or the new file, never
half of one). A host that starts finds its sandboxes paused (their processes ended with the
old host, their files stayed); `connect` resumes them, as after any pause.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
VERSION = 1


def save(path: Path, records: list[dict[str, Any]]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump({"version": VERSION, "sandboxes": records}, file)
    os.replace(temporary, path)


def load(path: Path) -> list[dict[str, Any]]:
    """The records, or none when there is no file; an unreadable file is set aside (and
    said so) rather than stopping the host from starting."""
    try:
        content = json.loads(path.read_text())
        if content.get("version") != VERSION or not isinstance(content.get("sandboxes"), list):
            raise ValueError(f"unknown format (version {content.get('version')!r})")
        records: list[dict[str, Any]] = content["sandboxes"]
        return records
    except FileNotFoundError:
        return []
    except (OSError, ValueError, AttributeError) as exc:
        aside = path.with_name(path.name + ".unreadable")
        log.error("cannot read %s (%s); moved it to %s and start empty", path, exc, aside)
        os.replace(path, aside)
        return []
