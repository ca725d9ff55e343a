"""Write the workspace as a zip or tar.gz to stdout, in the sandbox, as it is read.

`python3 -I -c <this> <json>` with the workspace, the format and the folders left out
(Burrow's internals). Links are stored as links, never followed; FIFOs, sockets and devices
are skipped (reading a FIFO could block forever). The output is a stream: the host sends
it on as it comes, so neither side holds the whole archive.
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import sys
import tarfile
import zipfile
from collections.abc import Iterator


def entries(root: str, excluded: set[str]) -> Iterator[tuple[str, str, os.stat_result]]:
    """(absolute path, archive name, lstat) of everything kept, folders before contents."""
    for here, dirs, files in os.walk(root, followlinks=False):
        rel_here = os.path.relpath(here, root)
        kept = []
        for name in sorted(dirs):
            rel = name if rel_here == "." else f"{rel_here}/{name}"
            if rel in excluded:
                continue
            full = os.path.join(here, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue  # gone meanwhile
            yield full, rel, st
            if stat.S_ISDIR(st.st_mode):
                kept.append(name)
        dirs[:] = kept  # a link to a folder is stored as a link, not entered
        for name in sorted(files):
            rel = name if rel_here == "." else f"{rel_here}/{name}"
            if rel in excluded:
                continue
            full = os.path.join(here, name)
            try:
                yield full, rel, os.lstat(full)
            except OSError:
                continue


# Fast compression: a download is waited for, and level 1 packs source text nearly as small
# as the defaults (tarfile's stream mode uses 9) at several times the speed.
LEVEL = 1


def write_tar(root: str, excluded: set[str]) -> None:
    with (
        gzip.GzipFile(fileobj=sys.stdout.buffer, mode="wb", compresslevel=LEVEL, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tf,
    ):
        for full, rel, st in entries(root, excluded):
            if not (
                stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)
            ):
                continue
            try:
                tf.add(full, arcname=rel, recursive=False)
            except OSError:
                continue  # vanished or unreadable: the rest still comes


def write_zip(root: str, excluded: set[str]) -> None:
    out = sys.stdout.buffer
    with zipfile.ZipFile(
        out, "w", zipfile.ZIP_DEFLATED, allowZip64=True, compresslevel=LEVEL
    ) as zf:
        for full, rel, st in entries(root, excluded):
            try:
                if stat.S_ISLNK(st.st_mode):
                    info = zipfile.ZipInfo(rel)
                    info.create_system = 3
                    info.external_attr = (stat.S_IFLNK | 0o777) << 16
                    zf.writestr(info, os.readlink(full))
                elif stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                    zf.write(full, rel)
            except OSError:
                continue


def main() -> None:
    args = json.loads(sys.argv[1])
    root = os.path.realpath(args["workspace"])
    excluded = {str(p) for p in args["excluded"]}
    (write_zip if args["format"] == "zip" else write_tar)(root, excluded)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
