"""envd's `filesystem.Filesystem` Connect service on a hosted sandbox."""

from __future__ import annotations

from e2b.envd.filesystem.filesystem_connect import Filesystem


class FilesystemService(Filesystem):
    pass
