"""A Dockerfile subset read as an environment: what a Harbor task or an E2B template brings.

Burrow builds environments without Docker (environments.py): a base, packages, a setup
script run once in a build sandbox, and variables. A Dockerfile within this subset says
exactly that, so it becomes an `EnvironmentSpec` and is built, cached and shared like any:

    FROM debian:<suite>[-slim]   the host's own system, when it is that Debian release
    RUN <command>                a step of the setup script (`/bin/sh -c`, as Docker runs it)
    ENV K=V ...                  the sandbox's variables, and the steps' after it
    WORKDIR <path>               where the steps after it run (made when missing)
    COPY [--chown=u:g] <src>... <dest>   files of the build context, carried in the script
    LABEL, EXPOSE, CMD, ENTRYPOINT, STOPSIGNAL, HEALTHCHECK   accepted and ignored: a
                                 sandbox runs what the agent runs, not an entry point

Everything else (ADD, ARG, USER, multi-stage builds, another base image) is refused with the
line and what to write instead: a Dockerfile half understood would build a different system
than its author meant. The context is untrusted (a task's or a template's upload): COPY
refuses `..`, absolute sources, links and anything but plain files, and the whole of what it
carries is bounded (the setup script holds it, base64 in a here-document).
"""

from __future__ import annotations

import base64
import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from burrow.runs.workspace.environments import MAX_SETUP_BYTES, EnvironmentSpec

MAX_DOCKERFILE_BYTES = 64 << 10
MAX_CONTEXT_BYTES = 40 << 10  # base64 of it, with the steps, stays within MAX_SETUP_BYTES
MAX_CONTEXT_FILES = 200
IGNORED = {"LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "STOPSIGNAL", "HEALTHCHECK", "MAINTAINER"}
DEBIAN = re.compile(r"debian:(?P<release>[a-z]+|\d+)(?:-(?:slim|\d{8}))*")
OS_RELEASE = Path("/etc/os-release")
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # the images'


class DockerfileError(ValueError):
    """A Dockerfile outside the subset, or a context COPY refuses; says the line and why."""


@dataclass(frozen=True)
class Recipe:
    """What a Dockerfile describes: the environment to build, and the directory its image
    starts in (a task's commands and checks run there)."""

    spec: EnvironmentSpec
    workdir: str


def host_release(os_release: Path = OS_RELEASE) -> tuple[str, str]:
    """(codename, version) of the host's Debian, e.g. ("bookworm", "12"); empty if not Debian."""
    fields: dict[str, str] = {}
    try:
        text = os_release.read_text()
    except OSError:
        return "", ""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        fields[key] = value.strip().strip('"')
    if fields.get("ID") != "debian":
        return "", ""
    return fields.get("VERSION_CODENAME", ""), fields.get("VERSION_ID", "")


def parse_dockerfile(
    name: str, text: str, context: Path | None, release: tuple[str, str] | None = None
) -> Recipe:
    """The environment `text` describes, named `name`; COPY reads from `context`."""
    if len(text.encode()) > MAX_DOCKERFILE_BYTES:
        raise DockerfileError(f"The Dockerfile is over {MAX_DOCKERFILE_BYTES >> 10} KiB.")
    codename, version = release if release is not None else host_release()
    steps: list[str] = ["cd /"]
    env: dict[str, str] = {}
    workdir = "/"
    carried = _Carried(context)
    based = False
    for number, line in _instructions(text):
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        where = f"Dockerfile line {number} ({word})"
        if word == "FROM":
            if based:
                raise DockerfileError(f"{where}: one FROM only; multi-stage builds are refused.")
            check_base(where, rest, codename, version)
            based = True
            continue
        if not based:
            raise DockerfileError(f"{where}: the Dockerfile must start with FROM.")
        if word == "RUN":
            steps.append(f"/bin/sh -c {shlex.quote(_command(where, rest))}")
        elif word == "ENV":
            for key, value in _variables(where, rest):
                env[key] = _expand(value, {"PATH": DEBIAN_PATH, **env})
                steps.append(f"export {key}={shlex.quote(env[key])}")
        elif word == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, _expand(rest, env)))
            steps.append(f"mkdir -p {shlex.quote(workdir)} && cd {shlex.quote(workdir)}")
        elif word == "COPY":
            steps += carried.copy(where, rest, workdir)
        elif word in IGNORED:
            continue
        else:
            raise DockerfileError(f"{where}: {_refusal(word)}")
    if not based:
        raise DockerfileError("The Dockerfile has no FROM.")
    setup = "\n".join(steps) + "\n"
    if len(setup.encode()) > MAX_SETUP_BYTES:
        raise DockerfileError(
            f"The Dockerfile's steps and copied files come to {len(setup.encode()) >> 10} KiB; "
            f"an environment's setup is at most {MAX_SETUP_BYTES >> 10} KiB."
        )
    spec = EnvironmentSpec(name, "host", (), setup, tuple(sorted(env.items())))
    return Recipe(spec, workdir)


def _instructions(text: str) -> list[tuple[int, str]]:
    """(first line number, instruction) with comments dropped and `\\` continuations joined."""
    found: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # Docker drops comment lines inside a continued instruction
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        found.append((start, pending + line))
        pending = ""
    if pending:
        found.append((start, pending.strip()))
    return found


def check_base(where: str, image: str, codename: str, version: str) -> None:
    if " " in image.strip():
        raise DockerfileError(f"{where}: `FROM {image}`: no `AS` stages or platform flags.")
    found = DEBIAN.fullmatch(image.strip())
    release = found.group("release") if found else None
    if release is not None and release in {codename, version} - {""}:
        return
    host = f"Debian {codename} ({version})" if codename else "a system that is not Debian"
    raise DockerfileError(
        f"{where}: `FROM {image}` is not a base this server builds on: environments start "
        f"from the host's system, here {host}. Write `FROM debian:{codename or 'bookworm'}` "
        "and install with RUN apt-get what the image would have added."
    )


def _command(where: str, rest: str) -> str:
    if not rest:
        raise DockerfileError(f"{where}: an empty RUN.")
    if rest.startswith("--"):
        raise DockerfileError(f"{where}: RUN flags (--mount, --network) are refused.")
    if rest.startswith("["):
        return shlex.join(_exec_form(where, rest))
    return rest


def _exec_form(where: str, rest: str) -> list[str]:
    try:
        argv = json.loads(rest)
    except json.JSONDecodeError:
        raise DockerfileError(f"{where}: a JSON list that does not parse.") from None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise DockerfileError(f"{where}: the exec form is a JSON list of strings.")
    return argv


def _variables(where: str, rest: str) -> list[tuple[str, str]]:
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise DockerfileError(f"{where}: {exc}.") from None
    if words and "=" not in words[0]:  # the old form: ENV KEY the value
        pairs = [(words[0], " ".join(words[1:]))]
    else:
        pairs = [tuple(w.split("=", 1)) for w in words if "=" in w]  # type: ignore[misc]
        if len(pairs) != len(words):
            raise DockerfileError(f"{where}: write ENV KEY=value.")
    for key, _ in pairs:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", key):
            raise DockerfileError(f"{where}: {key!r} is not a variable name.")
    return pairs


def _expand(value: str, env: dict[str, str]) -> str:
    """$NAME and ${NAME} from the ENV lines before it, as Docker expands ENV, WORKDIR and
    COPY (a value single-quoted in the Dockerfile is expanded too: a known difference)."""
    return re.sub(
        r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))",
        lambda m: env.get(m.group(1) or m.group(2), ""),
        value,
    )


def _refusal(word: str) -> str:
    instead = {
        "ADD": "use COPY (ADD fetches URLs and unpacks archives; neither is built here)",
        "ARG": "write the value in place (build arguments are not passed here)",
        "USER": "setup runs as the sandbox's root; run a daemon as its user with su or runuser",
        "SHELL": "steps run in /bin/sh -c; call bash -c in the RUN",
        "VOLUME": "the workspace is the sandbox's only volume",
        "ONBUILD": "images are not built on here",
    }
    return instead.get(word, "not in the subset Burrow builds (FROM, RUN, ENV, WORKDIR, COPY)")


class _Carried:
    """COPY's files, read from the context with its bounds, as steps of the script."""

    def __init__(self, context: Path | None) -> None:
        self.context = context.resolve() if context is not None else None
        self.bytes = 0
        self.files = 0

    def copy(self, where: str, rest: str, workdir: str) -> list[str]:
        try:
            words = shlex.split(rest)
        except ValueError as exc:
            raise DockerfileError(f"{where}: {exc}.") from None
        owner = ""
        while words and words[0].startswith("--"):
            flag = words.pop(0)
            if not flag.startswith("--chown="):
                raise DockerfileError(f"{where}: {flag.split('=')[0]} is refused (--chown only).")
            owner = flag.split("=", 1)[1]
        if len(words) < 2:
            raise DockerfileError(f"{where}: COPY <src>... <dest>.")
        *sources, dest = words
        dest = posixpath.join(workdir, dest)
        into_folder = dest.endswith(("/", "/.")) or len(sources) > 1
        steps: list[str] = []
        for source in sources:
            for path, relative in self._files(where, source):
                if relative is not None:  # a file of a copied folder
                    steps += self._write(path, posixpath.join(dest, relative), owner)
                elif into_folder:
                    steps += self._write(path, posixpath.join(dest, path.name), owner)
                else:  # into `dest` if it is a folder by then (Docker's rule), else as it
                    steps += [f"target={shlex.quote(posixpath.normpath(dest))}"]
                    steps += [f'[ -d "$target" ] && target="$target"/{shlex.quote(path.name)}']
                    steps += self._write(path, '"$target"', owner)
        return steps

    def _files(self, where: str, source: str) -> list[tuple[Path, str | None]]:
        """(file, its path under a copied folder, or None) of everything `source` names."""
        if self.context is None:
            raise DockerfileError(f"{where}: COPY needs a build context, and there is none.")
        parts = Path(source).parts
        if source.startswith("/") or ".." in parts:
            raise DockerfileError(f"{where}: {source!r} leaves the build context.")
        named = (
            sorted(self.context.glob(source))
            if any(c in source for c in "*?[")
            else [self.context / source]
        )
        if not named:
            raise DockerfileError(f"{where}: {source!r} is not in the build context.")
        found: list[tuple[Path, str | None]] = []
        for path in named:
            self._inside(where, path)
            if path.is_dir():
                for inner in sorted(path.rglob("*")):
                    self._inside(where, inner)
                    if not inner.is_dir():
                        found.append((inner, inner.relative_to(path).as_posix()))
            else:
                found.append((path, None))
        return found

    def _inside(self, where: str, path: Path) -> None:
        assert self.context is not None
        shown = path.relative_to(self.context) if path.is_relative_to(self.context) else path
        if path.is_symlink():
            raise DockerfileError(f"{where}: {shown} is a link; COPY carries plain files only.")
        if not path.exists():
            raise DockerfileError(f"{where}: {shown} is not in the build context.")
        if not (path.is_dir() or path.is_file()):
            raise DockerfileError(f"{where}: {shown} is not a plain file.")
        if not path.resolve().is_relative_to(self.context):
            raise DockerfileError(f"{where}: {shown} leaves the build context.")

    def _write(self, path: Path, target: str, owner: str) -> list[str]:
        """Steps writing `path` to `target` (a path, or a quoted shell word for one)."""
        size = path.stat().st_size
        self.bytes += size
        self.files += 1
        if self.bytes > MAX_CONTEXT_BYTES or self.files > MAX_CONTEXT_FILES:
            raise DockerfileError(
                f"COPY carries more than {MAX_CONTEXT_BYTES >> 10} KiB or "
                f"{MAX_CONTEXT_FILES} files; fetch larger inputs with RUN (apt-get, curl, git)."
            )
        with path.open("rb") as file:
            data = file.read(size)  # what was counted, should it grow meanwhile
        quoted = target if target.startswith('"') else shlex.quote(posixpath.normpath(target))
        mode = "755" if path.stat().st_mode & 0o111 else "644"
        encoded = base64.encodebytes(data).decode()
        steps = [
            f'mkdir -p "$(dirname {quoted})"',
            f"base64 -d > {quoted} <<'BURROW_COPY'\n{encoded}BURROW_COPY",
            f"chmod {mode} {quoted}",
        ]
        if owner:
            steps.append(f"chown {shlex.quote(owner)} {quoted}")
        return steps
