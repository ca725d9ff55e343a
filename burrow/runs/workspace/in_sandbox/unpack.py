"""Unpack an uploaded archive (zip, tar.gz, git bundle) into the workspace, in the sandbox.

`python3 -I -c <this> <json>`; the JSON names the workspace, the staging folder holding the
archive (`<staging>/archive`), its kind, the target folder and the limits. Each member is
checked before a byte of it is written: no `..`, no absolute path, no link, no device or
FIFO, a bounded path length, count and total size (counted as it decompresses, never taken
from the headers). Everything goes to `<staging>/tree` first and is moved into place only
when the whole archive passed, after checking that no move would clash with the workspace
or go through a link in it: a refused archive leaves nothing behind. A git bundle is
cloned by git (hooks off, objects checked) and checked out after its tree passes the same
count and size limits; git's own rules keep its checkout inside the work tree.

Prints one JSON object: {"files": [first paths], "total": n} or {"error": {code, message}}.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import zipfile
import zlib
from typing import IO, Any

CHUNK = 1 << 16
MAX_NAME_BYTES = 255


class Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Limits:
    def __init__(self, args: dict[str, Any]) -> None:
        self.max_bytes = int(args["max_bytes"])
        self.max_files = int(args["max_files"])
        self.max_path = int(args["max_path"])
        self.internal = [str(p) for p in args["internal"]]
        self.written = 0
        self.members = 0

    def count(self, name: str) -> None:
        self.members += 1
        if self.members > self.max_files:
            raise Refused(
                "archive_too_many_files",
                f"The archive has more than {self.max_files} members (at {name!r}; "
                "BURROW_UPLOAD_EXTRACT_MAX_FILES): split it, or unpack it with a command.",
            )

    def add(self, size: int, name: str) -> None:
        self.written += size
        if self.written > self.max_bytes:
            raise Refused(
                "archive_too_large",
                f"The archive unpacks to more than {self.max_bytes / 2**20:g} MB (reached at "
                f"{name!r}; BURROW_UPLOAD_EXTRACT_MAX_MB): nothing was written.",
            )


def member_path(name: str, target: str, limits: Limits) -> str:
    """The workspace-relative path of member `name`, or Refused naming the rule it breaks."""
    if "\0" in name or "\\" in name:
        raise Refused("archive_bad_path", f"Member {name!r} has a NUL or a backslash in its name.")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise Refused("archive_absolute_path", f"Member {name!r} has an absolute path.")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused("archive_path_escape", f"Member {name!r} climbs out with '..'.")
    if len(name.encode()) > limits.max_path or any(len(p.encode()) > MAX_NAME_BYTES for p in parts):
        raise Refused(
            "archive_path_too_long",
            f"Member {name[:80]!r}… is longer than {limits.max_path} bytes, or has a name "
            f"part over {MAX_NAME_BYTES} bytes.",
        )
    path = "/".join([target, *parts] if target else parts)
    for internal in limits.internal:
        if path == internal or path.startswith(internal + "/"):
            raise Refused(
                "archive_bad_path", f"Member {name!r} would land in Burrow's own {internal}."
            )
    return path


def link_refused(name: str, what: str) -> Refused:
    return Refused("archive_link", f"Member {name!r} is a {what}: archives with links are refused.")


def special_refused(name: str, what: str) -> Refused:
    return Refused(
        "archive_special_file",
        f"Member {name!r} is a {what}: only files and folders are unpacked.",
    )


def make_dir(dest: str, name: str) -> None:
    try:
        os.makedirs(dest, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise Refused("archive_conflict", f"Member {name!r} clashes with a file member.") from None


def write_member(
    source: IO[bytes], dest: str, name: str, mode: int, size: int, limits: Limits
) -> None:
    try:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise Refused("archive_conflict", f"Member {name!r} is inside a file member.") from None
    if os.path.lexists(dest):
        raise Refused("archive_conflict", f"Member {name!r} appears twice in the archive.")
    written = 0
    with open(dest, "xb") as out:
        while True:
            try:
                data = source.read(CHUNK)
            except (zipfile.BadZipFile, zlib.error, EOFError, tarfile.TarError, OSError) as exc:
                raise Refused("archive_corrupt", f"Member {name!r} is damaged: {exc}") from None
            if not data:
                break
            limits.add(len(data), name)
            written += len(data)
            out.write(data)
    if written != size:
        raise Refused("archive_corrupt", f"Member {name!r} is cut short: the archive is damaged.")
    os.chmod(dest, 0o755 if mode & 0o111 else 0o644)  # never setuid, never unreadable


def unpack_zip(archive: str, tree: str, target: str, limits: Limits) -> list[str]:
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise Refused("archive_corrupt", f"This is not a readable zip file: {exc}.") from None
    files = []
    with zf:
        infos = zf.infolist()
        planned = []
        declared = 0
        for info in infos:  # every member passes before a byte is written
            limits.count(info.filename)
            path = member_path(info.filename, target, limits)
            mode = info.external_attr >> 16
            is_dir = info.is_dir() or stat.S_ISDIR(mode)
            kind = stat.S_IFMT(mode) if info.create_system == 3 else 0
            if kind == stat.S_IFLNK:
                raise link_refused(info.filename, "symbolic link")
            if kind not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: no type given, a file
                raise special_refused(info.filename, "device, FIFO or socket")
            if info.flag_bits & 0x1:
                raise Refused("archive_encrypted", f"Member {info.filename!r} is encrypted.")
            declared += 0 if is_dir else info.file_size
            planned.append((info, path, is_dir, mode))
        if declared > limits.max_bytes:
            limits.add(declared, infos[-1].filename)  # refused from the headers alone
        for info, path, is_dir, mode in planned:
            dest = os.path.join(tree, path)
            if is_dir:
                make_dir(dest, info.filename)
                continue
            try:
                source = zf.open(info)
            except (zipfile.BadZipFile, NotImplementedError, zlib.error, OSError) as exc:
                raise Refused("archive_corrupt", f"Member {info.filename!r}: {exc}.") from None
            with source:
                write_member(source, dest, info.filename, mode, info.file_size, limits)
            files.append(path)
    return files


def unpack_tar(archive: str, tree: str, target: str, limits: Limits) -> list[str]:
    files = []
    try:
        tf = tarfile.open(archive, "r:*")  # noqa: SIM115  # closed by the `with tf` below
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise Refused("archive_corrupt", f"This is not a readable tar(.gz) file: {exc}.") from None
    with tf:
        while True:  # member by member: refused at the first bad one, nothing read past it
            try:
                member = tf.next()
            except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                raise Refused("archive_corrupt", f"The archive is damaged: {exc}.") from None
            if member is None:
                break
            limits.count(member.name)
            path = member_path(member.name, target, limits)
            if member.issym():
                raise link_refused(member.name, "symbolic link")
            if member.islnk():
                raise link_refused(member.name, "hard link")
            if member.ischr() or member.isblk():
                raise special_refused(member.name, "device")
            if member.isfifo():
                raise special_refused(member.name, "FIFO")
            dest = os.path.join(tree, path)
            if member.isdir():
                make_dir(dest, member.name)
                continue
            if not member.isreg():
                raise special_refused(member.name, f"tar entry of type {member.type!r}")
            source = tf.extractfile(member)
            if source is None:
                raise Refused("archive_corrupt", f"Member {member.name!r} has no data.")
            with source:
                write_member(source, dest, member.name, member.mode, member.size, limits)
            files.append(path)
    return files


GIT = [
    "git",
    "-c", "core.hooksPath=/dev/null",
    "-c", "transfer.fsckObjects=true",
    "-c", "core.symlinks=true",
]  # fmt: skip
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
    "HOME": "/tmp",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
}


def git(*args: str, cwd: str | None = None) -> bytes:
    done = subprocess.run(
        [*GIT, *args], cwd=cwd, env=GIT_ENV, capture_output=True, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip()[-400:]
        raise Refused("archive_corrupt", f"git could not read the bundle: {detail}")
    return done.stdout


def unpack_bundle(archive: str, tree: str, target: str, limits: Limits) -> list[str]:
    git("clone", "-q", "--no-checkout", "--", archive, tree)
    listing = git("ls-tree", "-r", "-z", "--long", "HEAD", cwd=tree) if has_head(tree) else b""
    files = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, raw = record.partition(b"\t")
        _, kind, _, size = meta.split()
        name = raw.decode(errors="surrogateescape")
        limits.count(name)
        files.append(member_path(name, target, limits))
        if kind == b"blob":
            limits.add(int(size), name)
    if files:
        git("checkout", "-q", cwd=tree)
    git("remote", "remove", "origin", cwd=tree)  # it names the staging copy, gone soon
    return files


def has_head(tree: str) -> bool:
    done = subprocess.run(
        [*GIT, "rev-parse", "-q", "--verify", "HEAD^{tree}"],
        cwd=tree, env=GIT_ENV, capture_output=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return done.returncode == 0


def ensure_target(workspace: str, target: str) -> None:
    """Make the target folder, refusing any part of it that is not a real folder."""
    here = workspace
    for part in [p for p in target.split("/") if p]:
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            os.mkdir(here)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise Refused(
                "archive_conflict",
                f"{os.path.relpath(here, workspace)} is not a folder in the workspace "
                "(a file or a link): unpack somewhere else.",
            )


def plan_moves(src: str, dst: str, workspace: str, moves: list[tuple[str, str]]) -> None:
    """What to move where; Refused when a staged entry clashes with the workspace. Only
    real folders are entered, so no move goes through a link the workspace holds."""
    for name in sorted(os.listdir(src)):
        s, d = os.path.join(src, name), os.path.join(dst, name)
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            moves.append((s, d))
            continue
        rel = os.path.relpath(d, workspace)
        if os.path.isdir(s) and not os.path.islink(s):
            if not stat.S_ISDIR(st.st_mode):
                raise Refused(
                    "archive_conflict", f"{rel} is a folder in the archive, not in the workspace."
                )
            plan_moves(s, d, workspace, moves)
        elif stat.S_ISDIR(st.st_mode):
            raise Refused(
                "archive_conflict", f"{rel} is a file in the archive, a folder in the workspace."
            )
        elif not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise Refused("archive_conflict", f"{rel} is a special file in the workspace.")
        else:
            moves.append((s, d))  # a file (or a link itself) is replaced, never followed


def main() -> dict[str, Any]:
    args = json.loads(sys.argv[1])
    workspace = os.path.realpath(args["workspace"])
    staging = os.path.join(workspace, args["staging"])
    target = str(args["target"]).strip("/")
    limits = Limits(args)
    tree = os.path.join(staging, "tree")
    archive = os.path.join(staging, "archive")
    try:
        if args["kind"] == "bundle":
            if os.path.lexists(os.path.join(workspace, target, ".git")):
                raise Refused(
                    "archive_conflict",
                    f"{target or 'The workspace'} already holds a git repository (.git): "
                    "unpack the bundle into another folder (the path field).",
                )
            files = unpack_bundle(archive, tree, "", limits)
            files = [f"{target}/{f}" if target else f for f in files]
            source_root = tree
        else:
            os.mkdir(tree)
            unpack = unpack_zip if args["kind"] == "zip" else unpack_tar
            files = unpack(archive, tree, target, limits)
            source_root = os.path.join(tree, target)
        if not os.path.isdir(source_root):
            return {"files": [], "total": 0}
        moves: list[tuple[str, str]] = []
        dest_root = os.path.join(workspace, target)
        if os.path.lexists(dest_root):
            ensure_target(workspace, target)
            plan_moves(source_root, dest_root, workspace, moves)
        else:
            ensure_target(workspace, os.path.dirname(target))
            moves.append((source_root, dest_root))
        for s, d in moves:
            os.replace(s, d)
    except Refused as exc:
        return {"error": {"code": exc.code, "message": exc.message}}
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return {
                "error": {
                    "code": "workspace_full",
                    "message": "The workspace's disk is full (BURROW_SANDBOX_DISK_MB): free "
                    "space or upload a smaller archive; nothing was written.",
                }
            }
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        for folder in (os.path.dirname(staging), os.path.dirname(os.path.dirname(staging))):
            try:
                os.rmdir(folder)  # the staging's parents, made for it, if nothing else is there
            except OSError:
                break
    listed = int(args["list_limit"])
    return {"files": files[:listed], "total": len(files)}


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main()))
