"""Archives in and out of the workspace: `extract` on uploads (zip, tar.gz, git bundle) and
the workspace download, against a real server and real sandboxes. Hostile archives are
each refused with a 400 naming the member and the rule, and leave nothing behind."""

from __future__ import annotations

import contextlib
import io
import random
import subprocess
import tarfile
import zipfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx

from burrow.sandbox.backend import ExecChunk, ExecRequest, closing_exec
from tests.api.harness import RunningServer, running_server


@contextlib.asynccontextmanager
async def serve(tmp_path: Path, **settings: Any) -> AsyncIterator[RunningServer]:
    async with running_server(tmp_path, None, model="demo", **settings) as srv:
        yield srv


CONV = "/api/conversations"


def own(srv: RunningServer) -> dict[str, str]:
    return {"Origin": srv.base_url}


async def extract(
    srv: RunningServer, cid: str, content: bytes, name: str, **fields: str
) -> httpx.Response:
    return await srv.client.post(
        f"/api/conversations/{cid}/uploads",
        files={"file": (name, content, "application/octet-stream")},
        data={"extract": "true", **fields},
        headers=own(srv),
    )


async def sh(srv: RunningServer, cid: str, script: str) -> str:
    sandbox = await srv.services.runtime.sandboxes.get(cid)
    out = bytearray()
    request = ExecRequest(argv=["sh", "-c", script])
    async with closing_exec(sandbox.exec(request)) as events:
        async for item in events:
            if isinstance(item, ExecChunk):
                out += item.data
    return out.decode()


async def tree(srv: RunningServer, cid: str) -> str:
    """Every path in the workspace but the checkpoint store, and /tmp's: the whole state."""
    return await sh(
        srv,
        cid,
        "find . /tmp -mindepth 1 -not -path './.burrow/checkpoints*' | sort; "
        "ls -la /tmp/outside 2>&1",
    )


def zip_of(members: list[tuple[str, bytes]], symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = 0o120777 << 16
            zf.writestr(info, target)
    return buffer.getvalue()


def tar_of(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, **attrs: Any) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


def zip_bomb(size: int) -> bytes:
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf,
        zf.open("bomb.bin", "w", force_zip64=True) as out,
    ):
        chunk = b"\0" * (1 << 20)
        for _ in range(size >> 20):
            out.write(chunk)
    return buffer.getvalue()


def tar_bomb(size: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tf:
        tf.addfile(member("fine.txt", size=2), io.BytesIO(b"ok"))
        tf.addfile(member("bomb.bin", size=size), io.BytesIO(b"\0" * size))
    return buffer.getvalue()


def noise_tar() -> bytes:
    return tar_of((member("a.txt"), b"a"), (member("noise.bin"), random.randbytes(100_000)))


HOSTILE: list[tuple[str, str, Callable[[], bytes], str, str]] = [
    ("zip slip", "x.zip", lambda: zip_of([("ok.txt", b"1"), ("../x", b"evil")]),
     "archive_path_escape", "'../x'"),
    ("tar slip", "x.tar.gz", lambda: tar_of((member("a/../../x"), b"evil")),
     "archive_path_escape", "a/../../x"),
    ("absolute", "x.tgz", lambda: tar_of((member("/tmp/outside/x"), b"evil")),
     "archive_absolute_path", "/tmp/outside/x"),
    ("zip absolute", "x.zip", lambda: zip_of([("/tmp/outside/x", b"evil")]),
     "archive_absolute_path", "/tmp/outside/x"),
    ("symlink then through it", "x.tar.gz",
     lambda: tar_of((member("link", tarfile.SYMTYPE, linkname="/tmp"), None),
                    (member("link/outside/x"), b"evil")),
     "archive_link", "'link'"),
    ("zip symlink", "x.zip", lambda: zip_of([], {"link": "/tmp"}), "archive_link", "'link'"),
    ("hardlink", "x.tar.gz",
     lambda: tar_of((member("ok.txt"), b"1"),
                    (member("hard", tarfile.LNKTYPE, linkname="/etc/passwd"), None)),
     "archive_link", "hard link"),
    ("device", "x.tar.gz",
     lambda: tar_of((member("dev", tarfile.CHRTYPE, devmajor=1, devminor=3), None)),
     "archive_special_file", "'dev'"),
    ("fifo", "x.tar.gz", lambda: tar_of((member("pipe", tarfile.FIFOTYPE), None)),
     "archive_special_file", "FIFO"),
    ("zip bomb", "x.zip", lambda: zip_bomb(64 << 20), "archive_too_large", "bomb.bin"),
    ("tar bomb", "x.tar.gz", lambda: tar_bomb(8 << 20), "archive_too_large", "bomb.bin"),
    ("many members", "x.zip", lambda: zip_of([(f"f{i}", b"") for i in range(10_000)]),
     "archive_too_many_files", "more than 5000"),
    ("long path", "x.zip", lambda: zip_of([("d/" * 600 + "x", b"1")]),
     "archive_path_too_long", "1024 bytes"),
    ("corrupt zip", "x.zip", lambda: b"PK\3\4" + b"\x17" * 500, "archive_corrupt", "zip"),
    ("truncated tar.gz", "x.tar.gz", lambda: noise_tar()[:40_000], "archive_corrupt",
     "damaged"),
    ("internal", "x.zip", lambda: zip_of([(".burrow/checkpoints/HEAD", b"x")]),
     "archive_bad_path", ".burrow/checkpoints"),
]  # fmt: skip


async def test_hostile_archives_are_refused_naming_the_member_and_leave_nothing(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, upload_extract_max_mb=4, upload_extract_max_files=5000) as srv:
        cid = await srv.create_conversation()
        await sh(srv, cid, "mkdir -p /tmp/outside kept && echo mine > kept/a.txt")
        before = await tree(srv, cid)
        for label, name, build, code, named in HOSTILE:
            response = await extract(srv, cid, build(), name)
            assert response.status_code == 400, (label, response.text)
            error = response.json()["error"]
            assert error["code"] == code, (label, error)
            assert named in error["message"], (label, error)
            assert await tree(srv, cid) == before, label


async def test_an_archive_never_writes_through_a_link_in_the_workspace(tmp_path: Path) -> None:
    async with serve(tmp_path) as srv:
        cid = await srv.create_conversation()
        await sh(srv, cid, "mkdir -p /tmp/outside real && ln -s /tmp/outside out && "
                 "ln -s real alias")  # fmt: skip
        before = await tree(srv, cid)
        for target, archive in (
            ("", zip_of([("out/x", b"evil")])),  # through a link met inside the archive's tree
            ("out", zip_of([("x", b"evil")])),  # a target that is a link
            ("alias/sub", zip_of([("x", b"evil")])),  # a target under a link
        ):
            response = await extract(srv, cid, archive, "a.zip", path=target)
            assert response.status_code == 400, response.text
            assert response.json()["error"]["code"] == "archive_conflict"
            assert await tree(srv, cid) == before


def git_bundle(tmp_path: Path) -> Path:
    """A repository of two files and one commit, as a bundle."""
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "src").mkdir()
    (repo / "src" / "main.py").write_text("print('hi')\n")
    (repo / "README.md").write_text("# repo\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    bundle = tmp_path / "repo.bundle"
    subprocess.run([*git, "bundle", "create", "-q", str(bundle), "--all"], check=True)
    return bundle


async def test_zip_tar_gz_and_bundle_are_extracted_with_their_content(tmp_path: Path) -> None:
    bundle = git_bundle(tmp_path)
    async with serve(tmp_path / "data") as srv:
        cid = await srv.create_conversation()
        zipped = zip_of([("app/index.html", b"<h1>hi</h1>"), ("app/", b""), ("top.txt", b"t")])
        response = await extract(srv, cid, zipped, "site.zip")
        assert response.status_code == 201, response.text
        assert response.json() == {"files": ["app/index.html", "top.txt"], "total": 2}
        tarred = tar_of((member("./lib/x.sh", mode=0o4755), b"echo x\n"))
        response = await extract(srv, cid, tarred, "lib.tgz", path="vendor")
        assert response.json() == {"files": ["vendor/lib/x.sh"], "total": 1}, response.text
        response = await extract(srv, cid, bundle.read_bytes(), "repo.bundle", path="code")
        assert response.status_code == 201, response.text
        assert response.json() == {"files": ["code/README.md", "code/src/main.py"], "total": 2}
        read = {
            p: (await srv.client.get(f"{CONV}/{cid}/files/content", params={"path": p})).text
            for p in ("app/index.html", "top.txt", "vendor/lib/x.sh", "code/src/main.py")
        }
        assert read == {
            "app/index.html": "<h1>hi</h1>",
            "top.txt": "t",
            "vendor/lib/x.sh": "echo x\n",
            "code/src/main.py": "print('hi')\n",
        }
        # Executable kept, setuid dropped; the bundle is a repository with its history.
        assert (await sh(srv, cid, "stat -c %a vendor/lib/x.sh")).strip() == "755"
        log = await sh(srv, cid, "cd code && git log --format=%s && git status --short")
        assert log.strip() == "first"
        assert (await sh(srv, cid, "test -e .burrow/imports || echo gone")).strip() == "gone"
        # A second bundle into the same folder would merge two repositories: refused.
        again = await extract(srv, cid, bundle.read_bytes(), "repo.bundle", path="code")
        assert again.status_code == 400 and again.json()["error"]["code"] == "archive_conflict"
        # Not an archive kind: said so, nothing extracted.
        other = await extract(srv, cid, b"hello", "notes.txt")
        assert other.json()["error"]["code"] == "unsupported_archive"


async def test_a_huge_extract_list_is_cut_and_counted(tmp_path: Path) -> None:
    async with serve(tmp_path) as srv:
        cid = await srv.create_conversation()
        archive = zip_of([(f"many/f{i:05}", b"x") for i in range(1500)])
        response = await extract(srv, cid, archive, "many.zip")
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["total"] == 1500 and len(body["files"]) == 1000
        assert body["files"][0] == "many/f00000"


async def test_extract_needs_the_owner_and_our_origin(tmp_path: Path) -> None:
    async with serve(tmp_path) as srv:
        cid = await srv.create_conversation()
        archive = zip_of([("x.txt", b"x")])
        foreign = await srv.client.post(
            f"/api/conversations/{cid}/uploads",
            files={"file": ("a.zip", archive)},
            data={"extract": "true"},
            headers={"Origin": "http://evil.example"},
        )
        assert foreign.status_code == 403
        created = await srv.client.post(
            "/api/users", json={"username": "bob", "password": "bob-password-123"}
        )
        assert created.status_code == 201, created.text
        async with httpx.AsyncClient(base_url=srv.base_url) as bob:
            login = await bob.post(
                "/api/auth/login", json={"username": "bob", "password": "bob-password-123"}
            )
            assert login.status_code == 200
            theirs = await bob.post(
                f"/api/conversations/{cid}/uploads",
                files={"file": ("a.zip", archive)},
                data={"extract": "true"},
                headers=own(srv),
            )
            assert theirs.status_code == 404
            download = await bob.get(f"/api/conversations/{cid}/workspace/archive")
            assert download.status_code == 404
        assert "x.txt" not in await tree(srv, cid)


async def test_an_archive_larger_than_the_workspace_disk_leaves_nothing(tmp_path: Path) -> None:
    async with serve(tmp_path, sandbox_disk_mb=32) as srv:
        cid = await srv.create_conversation()
        before = await tree(srv, cid)
        zeros = b"\0" * (1 << 20)  # a small archive that unpacks to 48 MB, on a 32 MB disk
        archive = zip_of([(f"big/{i}.bin", zeros) for i in range(48)])
        response = await extract(srv, cid, archive, "big.zip")
        assert response.status_code == 413, response.text
        assert response.json()["error"]["code"] == "workspace_full"
        assert await tree(srv, cid) == before
        fits = await extract(srv, cid, zip_of([("small.txt", b"ok")]), "small.zip")
        assert fits.status_code == 201, fits.text  # the space came back
