"""The Dockerfile subset an environment is read from: what it accepts becomes the same
environment a definition would, and what it refuses (another base, multi-stage builds,
instructions it does not build, a hostile build context) is refused with the line and why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from burrow.runs.workspace.dockerfile import (
    MAX_CONTEXT_FILES,
    DockerfileError,
    host_release,
    parse_dockerfile,
)

BOOKWORM = ("bookworm", "12")


def parse(text: str, context: Path | None = None) -> object:
    return parse_dockerfile("t", text, context, BOOKWORM)


def refused(text: str, context: Path | None = None) -> str:
    with pytest.raises(DockerfileError) as caught:
        parse_dockerfile("t", text, context, BOOKWORM)
    return str(caught.value)


def test_the_subset_becomes_an_environment(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("print('hi')\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "tool").chmod(0o755)
    recipe = parse_dockerfile(
        "t",
        "# a comment\n"
        "FROM debian:bookworm-slim\n"
        "ENV HOME_DIR=/srv/app\n"
        'ENV PATH=$HOME_DIR/bin:$PATH GREETING="hello there"\n'
        "ENV OLD the old form\n"
        "WORKDIR $HOME_DIR\n"
        "WORKDIR sub\n"
        "COPY app.py ./\n"
        "COPY bin/ /srv/app/bin/\n"
        "RUN apt-get update \\\n"
        "    # a comment inside a continuation\n"
        "    && true\n"
        'RUN ["echo", "exec form"]\n'
        "EXPOSE 8000\n"
        'CMD ["python3", "app.py"]\n',
        tmp_path,
        BOOKWORM,
    )
    spec = recipe.spec  # type: ignore[attr-defined]
    assert recipe.workdir == "/srv/app/sub"  # type: ignore[attr-defined]
    assert dict(spec.env) == {
        "HOME_DIR": "/srv/app",
        "PATH": "/srv/app/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "GREETING": "hello there",
        "OLD": "the old form",
    }
    assert spec.base == "host" and spec.packages == ()
    setup = spec.setup
    assert "/bin/sh -c 'apt-get update  && true'" in setup
    assert "/bin/sh -c 'echo '\"'\"'exec form'\"'\"''" in setup
    assert "base64 -d > /srv/app/bin/tool" in setup and "chmod 755 /srv/app/bin/tool" in setup
    assert "mkdir -p /srv/app/sub && cd /srv/app/sub" in setup
    # The same Dockerfile is the same build; a changed one is another.
    again = parse_dockerfile("u", "FROM debian:12\nRUN true\n", None, BOOKWORM).spec
    other = parse_dockerfile("u", "FROM debian:12\nRUN false\n", None, BOOKWORM).spec
    assert (
        again.key
        == parse_dockerfile("v", "FROM debian:bookworm\nRUN true\n", None, BOOKWORM).spec.key
    )
    assert again.key != other.key


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "FROM ubuntu:24.04\n",
            "not a base this server builds on: environments start from the host's "
            "system, here Debian bookworm",
        ),
        ("FROM debian:trixie\n", "Write `FROM debian:bookworm`"),
        ("FROM python:3.13-slim-bookworm\n", "not a base"),
        ("FROM debian:bookworm AS build\n", "no `AS` stages"),
        ("FROM debian:bookworm\nFROM debian:bookworm\n", "multi-stage builds are refused"),
        ("RUN true\n", "must start with FROM"),
        ("# nothing\n", "has no FROM"),
        ("FROM debian:bookworm\nADD https://example.com/x /x\n", "use COPY"),
        ("FROM debian:bookworm\nARG VERSION=1\n", "build arguments are not passed"),
        ("FROM debian:bookworm\nUSER nobody\n", "runs as the sandbox's root"),
        ("FROM debian:bookworm\nRUN --mount=type=cache,target=/x true\n", "RUN flags"),
        ("FROM debian:bookworm\nRUN\n", "an empty RUN"),
        ('FROM debian:bookworm\nRUN ["unclosed"\n', "does not parse"),
        ("FROM debian:bookworm\nENV 1BAD=x\n", "is not a variable name"),
        ("FROM debian:bookworm\nVOLUME /data\n", "the workspace is the sandbox's only volume"),
        ("FROM debian:bookworm\nFROBNICATE x\n", "not in the subset"),
        ("FROM debian:bookworm\nCOPY a.txt /a\n", "needs a build context"),
    ],
)
def test_what_is_outside_the_subset_is_refused_with_the_line(text: str, says: str) -> None:
    message = refused(text)
    assert says in message
    assert "Dockerfile" in message


def test_a_hostile_context_is_refused(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (tmp_path / "secret").write_text("host's")
    (context / "ok.txt").write_text("ok")
    os.symlink("/etc/shadow", context / "shadow")
    os.symlink(tmp_path / "secret", context / "secret")
    (context / "dir").mkdir()
    os.symlink("/etc", context / "dir" / "etc")
    os.mkfifo(context / "fifo")
    with (context / "sparse").open("wb") as sparse:
        sparse.truncate(10 << 30)  # 10 GiB that reads as zeros: refused by size, unread
    base = "FROM debian:bookworm\n"
    assert "leaves the build context" in refused(base + "COPY ../secret /x\n", context)
    assert "leaves the build context" in refused(base + "COPY /etc/passwd /x\n", context)
    assert "is a link" in refused(base + "COPY shadow /x\n", context)
    assert "is a link" in refused(base + "COPY secret /x\n", context)
    assert "is a link" in refused(base + "COPY dir /x/\n", context)
    assert "is a link" in refused(base + "COPY * /x/\n", context)
    assert "not a plain file" in refused(base + "COPY fifo /x\n", context)
    assert "more than 40 KiB" in refused(base + "COPY sparse /x\n", context)
    assert "not in the build context" in refused(base + "COPY missing.txt /x\n", context)
    assert "--from is refused" in refused(base + "COPY --from=build ok.txt /x\n", context)
    parse(base + "COPY ok.txt /x\n", context)  # the plain file alone is fine


def test_many_files_or_a_huge_dockerfile_are_refused(tmp_path: Path) -> None:
    for n in range(MAX_CONTEXT_FILES + 1):
        (tmp_path / f"f{n}").write_text("x")
    assert f"{MAX_CONTEXT_FILES} files" in refused("FROM debian:bookworm\nCOPY . /x/\n", tmp_path)
    assert "over 64 KiB" in refused("FROM debian:bookworm\n" + "RUN true\n" * 10000)


def test_the_host_release_is_read_from_os_release(tmp_path: Path) -> None:
    release = tmp_path / "os-release"
    release.write_text('ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n')
    assert host_release(release) == ("bookworm", "12")
    release.write_text("ID=fedora\nVERSION_ID=40\n")
    assert host_release(release) == ("", "")
    assert host_release(tmp_path / "missing") == ("", "")
    with pytest.raises(DockerfileError, match="a system that is not Debian"):
        parse_dockerfile("t", "FROM debian:bookworm\n", None, ("", ""))
