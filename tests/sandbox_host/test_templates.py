"""The stock e2b SDK builds templates on a real `burrow sandbox-host` (`Template.build`: its
upload, build and status routes) and starts sandboxes from them; the builds' attacks stay
in their build sandbox."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import tarfile
import time
from pathlib import Path

import httpx
import pytest
from e2b import AsyncSandbox, AsyncTemplate, BuildException, SandboxException, Template

from tests.sandbox_host.harness import API_KEY, OTHER_KEY, Host, point_sdk_at, sandbox_host

pytestmark = pytest.mark.timeout(180)


def _context(tmp_path: Path) -> Path:
    context = tmp_path / "context"
    (context / "app").mkdir(parents=True)
    (context / "app" / "hello.py").write_text("print('hello from the template')\n")
    (context / "app" / "data.txt").write_text("data\n")
    (context / "notes.txt").write_text("notes\n")
    return context


async def test_the_sdk_builds_a_template_and_a_sandbox_starts_from_it(
    sdk: Host, tmp_path: Path
) -> None:
    template = (
        Template(file_context_path=_context(tmp_path))
        .from_debian_image("bookworm")
        .set_envs({"GREETING": "hi there"})
        .copy("app", "/home/user/app")
        .copy("notes.txt", "/opt/", mode=0o600)
        .run_cmd("echo built by $(whoami) > /opt/built.txt", user="root")
        .run_cmd("whoami > /home/user/whoami.txt && echo step-output")
        .set_workdir("/home/user/app")
    )
    logs: list[str] = []
    started = time.monotonic()
    info = await AsyncTemplate.build(
        template, "greeter", on_build_logs=lambda entry: logs.append(entry.message)
    )
    built_in = time.monotonic() - started
    assert any("step-output" in line for line in logs), logs  # the steps' own output
    assert await AsyncTemplate.exists("greeter")

    sandbox = await AsyncSandbox.create("greeter")
    try:
        assert (await sandbox.get_info()).template_id == info.template_id
        result = await sandbox.commands.run(
            "pwd; cat /opt/built.txt; echo $GREETING; python3 hello.py; cat ../whoami.txt; "
            "stat -c %a /opt/notes.txt; ls -d /home/user/app"
        )
        assert result.stdout.splitlines() == [
            "/home/user/app",  # its WORKDIR
            "built by root",
            "hi there",
            "hello from the template",
            "user",  # steps run as E2B's `user` unless they say root
            "600",
            "/home/user/app",
        ]
        # The files API and the shell see the same home: the template's, in the workspace.
        assert await sandbox.files.read("/home/user/app/data.txt") == "data\n"
        await sandbox.files.write("/home/user/app/new.txt", "from the API")
        assert (await sandbox.commands.run("cat /home/user/app/new.txt")).stdout == "from the API"
    finally:
        await sandbox.kill()

    # Unchanged, it is built already: nothing runs again.
    started = time.monotonic()
    logs.clear()
    await AsyncTemplate.build(
        template, "greeter", on_build_logs=lambda entry: logs.append(entry.message)
    )
    assert not any("step-output" in line for line in logs), logs
    assert time.monotonic() - started < max(built_in, 5.0)

    # Another template goes on from this one.
    child = Template().from_template("greeter").run_cmd("echo child >> /opt/built.txt", "root")
    await AsyncTemplate.build(child, "greeter-child")
    sandbox = await AsyncSandbox.create("greeter-child")
    try:
        result = await sandbox.commands.run("cat /opt/built.txt; cat hello.py")  # its WORKDIR
        assert result.stdout.splitlines()[:2] == ["built by root", "child"]
    finally:
        await sandbox.kill()


async def test_builds_outside_the_subset_or_failing_say_why(sdk: Host) -> None:
    with pytest.raises(BuildException, match="from_debian_image"):
        await AsyncTemplate.build(Template().from_image("python:3"), "other-image")
    if importlib.util.find_spec("burrow.sandbox.debian_base") is None:
        # Another Debian release: only where environments build Debian bases (mmdebstrap).
        with pytest.raises(BuildException, match=r"\(debian:bookworm\).*need Debian bases"):
            await AsyncTemplate.build(Template().from_debian_image("trixie"), "other-release")
    with pytest.raises(BuildException, match="start a server after"):
        failing = Template().from_debian_image("bookworm").set_start_cmd("sleep 1", "true")
        await AsyncTemplate.build(failing, "with-start")
    broken = Template().from_debian_image("bookworm").run_cmd("echo the-tail; exit 3")
    with pytest.raises(BuildException, match=r"exited with 3(.|\n)*the-tail"):
        await AsyncTemplate.build(broken, "broken")
    with pytest.raises(SandboxException, match="no finished build"):
        await AsyncSandbox.create("broken")


async def test_another_key_has_no_such_template(sdk: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    await AsyncTemplate.build(Template().from_debian_image("bookworm").run_cmd("true"), "mine")
    point_sdk_at(monkeypatch, sdk, OTHER_KEY)
    assert not await AsyncTemplate.exists("mine")
    with pytest.raises(SandboxException, match="not found"):
        await AsyncSandbox.create("mine")


def _tar(*members: tuple[str, bytes, str], gzip: bool = False) -> bytes:
    """A tar of (name, type, link target or content) members."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz" if gzip else "w") as tar:
        for name, kind, value in members:
            member = tarfile.TarInfo(name)
            member.type = kind
            if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                member.linkname = value
                tar.addfile(member)
            else:
                member.size = len(value)
                tar.addfile(member, io.BytesIO(value.encode()) if value else None)
    return out.getvalue()


REG, SYM, LNK, DIR = tarfile.REGTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE


def _hostile_archives(marker: Path) -> list[tuple[bytes, str]]:
    """Archives that climb out, name the host, link out or through a link: each with the
    words its refusal has."""
    return [
        (_tar(("ok.txt", REG, "ok"), (f"../../../..{marker}-dots", REG, "bad")), "leaves the"),
        (_tar((f"{marker}-absolute", REG, "bad")), "leaves the archive"),
        (_tar(("out", SYM, str(marker.parent))), "outside the archive"),
        (_tar(("out", SYM, "../../.."), ("out/pwned", REG, "bad")), "outside the archive"),
        # each link stays inside by its own words; the second goes out through the first
        (_tar(("here", SYM, "."), ("up", SYM, "here/.."), ("up/pwned", REG, "x")), "outside"),
        (_tar(("in", SYM, "."), ("in/x", REG, "x")), "through a link"),
        (_tar(("hard", LNK, "../../etc/passwd")), "hard link outside"),
        (_tar(("fifo", tarfile.FIFOTYPE, "")), "FIFOs"),
        (b"not a tar at all" * 64, "not a readable tar"),
    ]


def _bomb() -> bytes:
    """200 MiB of zeros in about 200 KiB: over the 64 MiB cap only once inflated."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        member = tarfile.TarInfo("zeros")
        member.size = 200 << 20
        tar.addfile(member, io.BytesIO(bytes(member.size)))
    return out.getvalue()


async def test_hostile_uploads_are_refused_and_nothing_is_kept(sdk: Host, tmp_path: Path) -> None:
    marker = tmp_path / "host-marker"
    headers = {"X-API-KEY": API_KEY}
    async with httpx.AsyncClient(base_url=sdk.url, headers=headers, timeout=60) as client:
        opened = (await client.post("/v3/templates", json={"name": "hostile"})).json()
        template_id = opened["templateID"]

        async def upload(number: int, content: bytes) -> httpx.Response:
            digest = f"{number:02x}" * 32
            link = (await client.get(f"/templates/{template_id}/files/{digest}")).json()
            assert link["present"] is False
            return await client.put(link["url"], content=content)

        hostile = _hostile_archives(marker)
        for number, (archive, words) in enumerate(hostile):
            refused = await upload(number, archive)
            assert refused.status_code == 400, (words, refused.text)
            assert words in refused.json()["message"], refused.text
        many = _tar(*((f"f{i}", REG, "") for i in range(50_001)), gzip=True)
        for number, (archive, words) in enumerate(
            [(_bomb(), "unpack to over 64 MiB"), (many, "more than 50000 entries")], 50
        ):
            refused = await upload(number, archive)
            assert refused.status_code == 413 and words in refused.json()["message"]
        # Oversized uploads are cut off at the cap, before they are looked into.
        big = await upload(60, b"\0" * (65 << 20))
        assert big.status_code == 413 and "cap" in big.json()["message"]
        fine = await upload(61, _tar(("app", DIR, ""), ("app/a", REG, "a"), ("l", SYM, "app/a")))
        assert fine.status_code == 200
        assert (await client.put(fine.request.url, content=b"again")).status_code == 403
    assert _left_on_the_host(tmp_path) == []  # nothing of them reached the host
    kept = {p.name for p in (sdk.data_dir / "templates" / "archives").iterdir()}
    assert not kept & {hashlib.sha256(archive).hexdigest() for archive, _ in hostile}
    assert not [name for name in kept if name.startswith(".")]  # no partial upload left


def _left_on_the_host(folder: Path) -> list[Path]:
    return list(folder.iterdir())


async def test_a_template_outlives_a_host_restart_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    template = Template().from_debian_image("bookworm").run_cmd("echo kept > /opt/kept", "root")
    with sandbox_host(data_dir) as host:
        point_sdk_at(monkeypatch, host)
        Template.build(template, "kept")  # the SDK's sync flavour, too
    with sandbox_host(data_dir) as host:
        point_sdk_at(monkeypatch, host)
        assert Template.exists("kept")
        sandbox = await AsyncSandbox.create("kept")
        try:
            assert (await sandbox.commands.run("cat /opt/kept")).stdout == "kept\n"
        finally:
            await sandbox.kill()
        logs: list[str] = []
        Template.build(template, "kept", on_build_logs=lambda e: logs.append(e.message))
        assert any("built before" in line for line in logs), logs  # found built, not rebuilt


async def test_the_sdk_builds_a_template_from_a_dockerfile(sdk: Host, tmp_path: Path) -> None:
    """The issue's own words: the stock SDK builds a template from a Dockerfile (its parser
    turns it into steps) and a sandbox starts from it, /home/user as on E2B."""
    context = _context(tmp_path)
    (context / "Dockerfile").write_text(
        "FROM debian:bookworm\n"
        "ENV APP_MODE=production\n"
        "RUN mkdir -p /srv/tool && echo tool > /srv/tool/version\n"
        "COPY app/ /home/user/app/\n"
        "WORKDIR /home/user/app\n"
        'RUN echo "$APP_MODE" > mode.txt\n'
    )
    template = Template(file_context_path=context).from_dockerfile(str(context / "Dockerfile"))
    await AsyncTemplate.build(template, "from-dockerfile")
    sandbox = await AsyncSandbox.create("from-dockerfile")
    try:
        result = await sandbox.commands.run(
            "pwd; echo $APP_MODE; cat /srv/tool/version mode.txt; python3 hello.py; whoami"
        )
        assert result.stdout.splitlines() == [
            "/home/user/app",
            "production",
            "tool",
            "production",
            "hello from the template",
            "user",  # a sandbox's commands run as E2B's `user` (docs/sandbox-host.md)
        ]
        assert await sandbox.files.read("app/mode.txt") == "production\n"
    finally:
        await sandbox.kill()


async def test_a_templates_last_user_is_its_sandboxes_default(sdk: Host) -> None:
    """As envd's default user: where the steps' last USER left them (else `user`)."""
    template = Template().from_debian_image("bookworm").run_cmd("true").set_user("root")
    await AsyncTemplate.build(template, "as-root")
    sandbox = await AsyncSandbox.create("as-root")
    try:
        assert (await sandbox.commands.run("whoami")).stdout == "root\n"
        assert (await sandbox.commands.run("whoami", user="user")).stdout == "user\n"
        await sandbox.files.write("/opt/by-default", "x")  # root's: /opt is root's anyway
        assert (await sandbox.files.get_info("/opt/by-default")).owner == "root"
        await sandbox.files.write("mine", "x", user="user")
        assert (await sandbox.files.get_info("mine")).owner == "user"
    finally:
        await sandbox.kill()
