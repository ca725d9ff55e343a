"""An E2B template build (the SDK's `Template()...` steps, `TemplateBuildStartV2`) read as
an environment: the same machinery as a Dockerfile (runs/workspace/dockerfile.py), so a
template is built once, cached as a layer and started from in milliseconds.

    fromImage debian:<suite>[-slim]   the host's own system, when it is that Debian release;
                                      another, where environments build Debian bases
    fromTemplate <name or id>         that template's steps first (one of the key's own)
    RUN [command, user?]              `/bin/sh -c`, as the step's or the current user
    USER [user]                       the user of the steps after it (made when missing)
    WORKDIR [path]                    where the steps after it run (made when missing)
    ENV [k, v, ...]                   the sandbox's variables, and the steps' after it
    COPY [src, dest, user?, mode?]    from the step's uploaded archive (`filesHash`)

As on E2B, steps start as `user` (home `/home/user`, made by the build) in `/home/user`, and
where the last USER and WORKDIR leave them is where the sandbox's commands start. COPY's
archive, checked at its upload (template_archive.py: links out, `..`, bombs refused), is
unpacked by the build script inside the build sandbox, not by this host, whose walls hold
whatever it holds. Anything else — another
base image, a private registry, start and ready commands — is refused with what to do
instead: a template half understood would build a different system than its author meant.
"""

from __future__ import annotations

import importlib
import posixpath
import secrets
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from burrow.runs.workspace.dockerfile import (
    DEBIAN,
    DEBIAN_PATH,
    DockerfileError,
    check_base,
    host_release,
)
from burrow.runs.workspace.environments import (
    CONTEXT_PREFIX,
    DIGEST,
    MAX_CONTEXT_ARCHIVES,
    MAX_SETUP_BYTES,
    EnvironmentSpec,
)
from burrow.sandbox_host.users import E2B_HOME, E2B_USER, PYTHON, USER_NAME, account

HOME_SEED = "/etc/burrow/home"
# A template's last lines. Its build sandbox has the host's E2B layout too (local.py
# `home`): /home/user is the build's workspace, so what the steps left there is copied
# into the layer, for each new sandbox's workspace to start with (registry.py).
FINISH = f"""rm -rf /tmp/burrow-context {E2B_HOME}/{CONTEXT_PREFIX}*
rm -rf {HOME_SEED} && mkdir -p {HOME_SEED} && cp -a {E2B_HOME}/. {HOME_SEED}/
"""
MAX_STEPS = 500
MAX_ARG_CHARS = 16 << 10

# Docker's COPY from an unpacked archive: a folder's contents into `dest`; a file into
# `dest` when that is (or ends like) a folder, else as `dest`. Globs in `src` match.
COPY_FUNCTION = r"""burrow_copy() {
  archive="/workspace/@PREFIX@$1" context="/tmp/burrow-context/$1" dest="$3"
  if [ ! -d "$context" ]; then
    mkdir -p "$context" && tar -xf "$archive" -C "$context" --no-same-owner
  fi
  found=
  for match in "$context"/$2; do
    [ -e "$match" ] || continue
    found=1
    if [ -d "$match" ]; then
      target="$dest"; mkdir -p "$target" && cp -a "$match"/. "$target"/
    else
      case "$dest" in */) target="$dest$(basename "$match")" ;; *) target="$dest" ;; esac
      [ -d "$target" ] && target="$target/$(basename "$match")"
      mkdir -p "$(dirname "$target")" && cp -a "$match" "$target"
    fi
    [ -z "$4" ] || chown -R "$4" "$target"
    [ -z "$5" ] || chmod -R "$5" "$target"
  done
  [ -n "$found" ] || { echo "COPY $2: not in the uploaded files" >&2; return 1; }
}""".replace("@PREFIX@", CONTEXT_PREFIX)


class TemplateRefused(ValueError):
    """A build outside what this host builds; says which step and what to do instead."""


@dataclass(frozen=True)
class TemplateRecipe:
    """What a template's build describes: its environment, and where its commands start."""

    spec: EnvironmentSpec
    workdir: str = E2B_HOME
    user: str = E2B_USER


def read_build(
    name: str,
    body: dict[str, Any],
    *,
    base_template: Callable[[str], TemplateRecipe | None],
    archive_of: Callable[[str], str | None],
    release: tuple[str, str] | None = None,
) -> TemplateRecipe:
    """The environment `body` (a `TemplateBuildStartV2`) describes, named `name`.
    `base_template` finds a `fromTemplate` (None: not one of the key's ready templates);
    `archive_of` is the sha256 of the archive a COPY's `filesHash` uploaded (None: none was;
    the SDK's hash is of the files, unchecked, so the build names the archive by its own)."""
    unsupported = sorted(k for k in ("fromImageRegistry", "startCmd", "readyCmd") if body.get(k))
    if unsupported:
        raise TemplateRefused(
            f"{', '.join(unsupported)}: not served by burrow sandbox-host. Images come from the "
            "host's Debian only, and a sandbox runs what you run in it: start a server after "
            "create with sandbox.commands.run(..., background=True)."
        )
    steps = body.get("steps") or []
    if not isinstance(steps, list) or len(steps) > MAX_STEPS:
        raise TemplateRefused(f"steps is a list of at most {MAX_STEPS} steps.")
    image, parent = body.get("fromImage"), body.get("fromTemplate")
    if parent:
        start = base_template(str(parent))
        if start is None:
            raise TemplateRefused(
                f"fromTemplate {parent!r}: no ready template of that name or id for this API "
                "key; build it first."
            )
    else:
        start = TemplateRecipe(EnvironmentSpec(name, _base(image, release)))
    return _Steps(start, archive_of).read(name, steps, force=body.get("force") is True)


class _Steps:
    def __init__(self, start: TemplateRecipe, archive_of: Callable[[str], str | None]) -> None:
        self.archive_of = archive_of
        self.env = dict(start.spec.env)
        self.context = list(start.spec.context)
        self.workdir, self.user = start.workdir, start.user
        self.base = start.spec.base  # a fromTemplate's, or what fromImage named
        self.base_setup = start.spec.setup.removesuffix(FINISH)  # its steps go on from there

    def read(self, name: str, steps: list[Any], *, force: bool) -> TemplateRecipe:
        lines = [] if self.base_setup else [COPY_FUNCTION, *account(E2B_USER), PYTHON]
        lines.append(f"mkdir -p {shlex.quote(self.workdir)} && cd {shlex.quote(self.workdir)}")
        for number, step in enumerate(steps, 1):
            if not isinstance(step, dict):
                raise TemplateRefused(f"step {number}: a step is an object.")
            kind, args = step.get("type"), step.get("args") or []
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise TemplateRefused(f"step {number} ({kind}): args is a list of strings.")
            if sum(len(a) for a in args) > MAX_ARG_CHARS:
                raise TemplateRefused(f"step {number} ({kind}): its args are too long.")
            lines += self._step(f"step {number} ({kind})", kind, args, step.get("filesHash"))
        if force:  # skip_cache(): a build of its own, whatever was built before
            lines.append(f"# forced build {secrets.token_hex(6)}")
        setup = "\n".join(filter(None, [self.base_setup.rstrip("\n"), *lines])) + "\n" + FINISH
        if len(setup.encode()) > MAX_SETUP_BYTES:
            raise TemplateRefused(f"The steps come to more than {MAX_SETUP_BYTES >> 10} KiB.")
        spec = EnvironmentSpec(
            name, self.base, (), setup, tuple(sorted(self.env.items())), tuple(self.context)
        )
        return TemplateRecipe(spec, self.workdir, self.user)

    def _step(self, where: str, kind: Any, args: list[str], digest: Any) -> list[str]:
        if kind == "RUN":
            if not args or not args[0].strip():
                raise TemplateRefused(f"{where}: a command to run.")
            user = args[1] if len(args) > 1 and args[1] else self.user
            return [_as_user(_checked_user(where, user), args[0])]
        if kind == "USER":
            self.user = _checked_user(where, args[0] if args else "")
            return account(self.user)
        if kind == "WORKDIR":
            if not args or not args[0]:
                raise TemplateRefused(f"{where}: a directory.")
            self.workdir = posixpath.normpath(posixpath.join(self.workdir, args[0]))
            quoted = shlex.quote(self.workdir)
            return [f"mkdir -p {quoted} && cd {quoted}"]
        if kind == "ENV":
            if len(args) % 2:
                raise TemplateRefused(f"{where}: args are name, value pairs.")
            lines = []
            for key, value in zip(args[::2], args[1::2], strict=True):
                if not key.isidentifier():
                    raise TemplateRefused(f"{where}: {key!r} is not a variable name.")
                self.env[key] = value
                lines.append(f"export {key}={shlex.quote(value)}")
            self.env.setdefault("PATH", DEBIAN_PATH)
            return lines
        if kind == "COPY":
            return [self._copy(where, args, digest)]
        raise TemplateRefused(
            f"{where}: not a step this host builds (RUN, USER, WORKDIR, ENV and COPY are)."
        )

    def _copy(self, where: str, args: list[str], digest: Any) -> str:
        if len(args) < 2 or not args[0] or not args[1]:
            raise TemplateRefused(f"{where}: a source and a destination.")
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            raise TemplateRefused(f"{where}: filesHash is the sha256 of its files.")
        archive = self.archive_of(digest)
        if archive is None:
            raise TemplateRefused(f"{where}: its files ({digest[:12]}...) were not uploaded.")
        source = args[0]
        if source.startswith("/") or ".." in source.split("/"):
            raise TemplateRefused(f"{where}: {source!r} leaves the build context.")
        owner = args[2] if len(args) > 2 else ""
        mode = args[3] if len(args) > 3 else ""
        if owner and not all(_is_user(part) for part in owner.split(":", 1)):
            raise TemplateRefused(f"{where}: {owner!r} is not user[:group].")
        if mode and not (mode.isdigit() and set(mode) <= set("01234567") and len(mode) <= 4):
            raise TemplateRefused(f"{where}: mode {mode!r} is not octal.")
        if archive not in self.context:
            if len(self.context) >= MAX_CONTEXT_ARCHIVES:
                raise TemplateRefused(f"{where}: at most {MAX_CONTEXT_ARCHIVES} COPY uploads.")
            self.context.append(archive)
        words = [archive, source, args[1], owner, mode]
        return "burrow_copy " + " ".join(shlex.quote(w) for w in words)


def _base(image: Any, release: tuple[str, str] | None) -> str:
    """The environment base a `fromImage` is: the host's system for its own Debian
    release; another Debian release where environments build Debian bases (mmdebstrap,
    burrow/sandbox/debian_base.py); anything else is refused, saying what is served."""
    codename, version = release if release is not None else host_release()
    asked = str(image or "e2bdev/base")
    try:
        check_base("fromImage", asked, codename, version)
        return "host"
    except DockerfileError:
        pass
    debian = _debian_bases()
    found = DEBIAN.fullmatch(asked.strip())
    if found and debian is not None:
        base = f"debian:{found.group('release')}"
        if debian.suite_of(base) is not None:
            return base
    host = f"debian:{codename}" if codename else "none: this host is not Debian"
    others = (
        "; other Debian releases: from_debian_image('<suite>')"
        if debian is not None
        else "; Debian images of other releases need Debian bases, which this host's "
        "environments do not build"
    )
    raise TemplateRefused(
        f"fromImage {image or '(E2B base image)'!r}: templates here start from the host's "
        f"own system ({host}): use Template().from_debian_image({codename!r}){others}; "
        "install with apt_install() what the image would have added."
    )


def _debian_bases() -> Any:
    """The Debian bases module where this Burrow has one (None: the host's system only)."""
    try:
        return importlib.import_module("burrow.sandbox.debian_base")
    except ModuleNotFoundError:
        return None


def _is_user(name: str) -> bool:
    return USER_NAME.fullmatch(name) is not None


def _checked_user(where: str, user: str) -> str:
    if not _is_user(user):
        raise TemplateRefused(f"{where}: {user!r} is not a user name.")
    return user


def _as_user(user: str, command: str) -> str:
    if user == "root":
        return f"/bin/sh -c {shlex.quote(command)}"
    return f"runuser -u {shlex.quote(user)} -- /bin/sh -c {shlex.quote(command)}"
