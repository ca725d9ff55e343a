"""Environments: a named system a conversation's sandbox starts from, built once and kept.

An environment is a name, a base, Debian packages, a setup script and environment
variables (DESIGN §9). Administrators define them; everyone may use them. Its build runs
once, in a fresh sandbox of its own with every wall of any other (the server's default
network, no user's secret): `apt-get install -y` of the packages, then the setup script,
with the variables set. What the build changed of the system is kept by the backend as a
read-only layer (`EnvironmentLayers`, rootfs.py) that every sandbox of the environment
starts from, under a layer of its own: a new conversation starts as fast as on the host's
system. A build is keyed by a hash of the definition, so an unchanged environment is never
built again (a restart finds it built); a changed one is built beside the old, which stays
for the conversations whose sandboxes started on it.

Builds stream: the output's tail is on `GET /api/environments/{name}` (`status`,
`log_tail`) and a conversation that waits for one gets `environment.build` events, at
least one every `PROGRESS_SECONDS` while it runs. A failure says the script's exit and the
tail of its output; a build can be cancelled.

A build may carry a context: archives (by their sha256) that are written into the build
sandbox's workspace as `.burrow-context-<digest>` before its script runs, from where the
script unpacks them. The sandbox host's E2B templates use it for COPY (templates.py there);
the script, not the host, unpacks them, so a hostile archive stays inside the sandbox.

The base is the host's system (`host`), or a Debian system (`debian:<suite>`) that
mmdebstrap builds with the environment's packages (sandbox/debian_base.py): first that
base, keyed by its suite and packages and shared by every environment that names the same
(an unchanged one is never built again), then the setup in a build sandbox standing on it.
Its output streams like the setup's, and cancelling the build stops mmdebstrap too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from burrow.sandbox import debian_base
from burrow.sandbox.backend import (
    Backend,
    ExecChunk,
    ExecExit,
    ExecRequest,
    NetworkPolicy,
    Sandbox,
    SandboxError,
    closing_exec,
)

log = logging.getLogger(__name__)

SETTING_PREFIX = "environment."
NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]{0,99}(=[A-Za-z0-9.+~:-]{1,100})?")
VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MAX_PACKAGES, MAX_SETUP_BYTES, MAX_VARIABLES, MAX_VALUE_BYTES = 200, 64 << 10, 50, 4 << 10
MAX_CONTEXT_ARCHIVES = 64
DIGEST = re.compile(r"[0-9a-f]{64}")
CONTEXT_PREFIX = ".burrow-context-"  # + digest: where a build finds its archives
LOG_TAIL_BYTES = 16 << 10
FAILURE_TAIL_BYTES = 2000
PROGRESS_SECONDS = 1.5  # a progress event at least this often while a build runs
BUILD_TIMEOUT_SECONDS = 3600.0
# The variables a sandbox on the environment starts with, as its build leaves them in its
# layer (NUL-separated KEY=VALUE); the guest reads them at start (guest/server.py).
ENVIRONMENT_FILE = "/etc/burrow/environment"
PROFILE_FILE = "/etc/profile.d/burrow-environment.sh"  # the same, for login shells

Status = Literal["building", "ready", "failed", "cancelled"]
Stage = Literal["started", "progress", "done", "failed"]
Listener = Callable[[Stage, str], Awaitable[None]]


@runtime_checkable
class Definitions(Protocol):
    """Where definitions are saved (the server's settings table; a JSON file for the
    sandbox host): name -> JSON, None deleting."""

    async def all(self) -> dict[str, str | None]: ...

    async def put(self, values: dict[str, str | None]) -> None: ...


class JsonDefinitions:
    """Definitions in one JSON file, for where there is no database (the sandbox host)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def all(self) -> dict[str, str | None]:
        try:
            saved = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): v for k, v in saved.items() if isinstance(v, str)}

    async def put(self, values: dict[str, str | None]) -> None:
        saved: dict[str, str | None] = dict(await self.all())
        saved.update(values)
        kept = {k: v for k, v in saved.items() if v is not None}
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(kept))
        os.replace(temporary, self.path)


class Archives(Protocol):
    """The build contexts' archives by sha256 digest; None when there is no such one."""

    def archive(self, digest: str) -> Path | None: ...


@runtime_checkable
class EnvironmentLayers(Protocol):
    """A backend that keeps what a sandbox changed of its system as a layer other
    sandboxes start from (`create(..., environment=key)`)."""

    async def save_environment(self, sandbox_id: str, key: str) -> None:
        """Keep the stopped sandbox `sandbox_id`'s system changes as environment `key`."""
        ...

    def environment_exists(self, key: str) -> bool: ...

    def environment_build_of(self, sandbox_id: str) -> str | None:
        """The build the sandbox started on, which it keeps (None: none yet)."""
        ...

    async def collect_environments(self, keep: set[str]) -> list[str]:
        """Remove the builds neither in `keep` nor stood on by a sandbox; their keys."""
        ...


class EnvironmentInvalid(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class EnvironmentUnavailable(Exception):
    """A conversation's environment is not there to start from: unknown, failed, removed."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class EnvironmentSpec:
    name: str
    base: str = "host"
    packages: tuple[str, ...] = ()
    setup: str = ""
    env: tuple[tuple[str, str], ...] = ()
    context: tuple[str, ...] = ()  # archives' digests, written into the build sandbox

    @property
    def key(self) -> str:
        """The build's identity: what the layer holds depends on these and nothing else."""
        fields: list[Any] = [self.base, self.packages, self.setup, self.env]
        if self.context:  # (only then: the keys of environments without one stay as they were)
            fields.append(self.context)
        what = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(what.encode()).hexdigest()[:16]

    def script(self) -> str:
        """What the build sandbox runs: the packages, then the setup, stopping at the first
        failure (its exit is the build's)."""
        lines = ["set -e", "export DEBIAN_FRONTEND=noninteractive"]
        if self.packages and self.debian_suite is None:  # a Debian base has them already
            packages = " ".join(shlex.quote(p) for p in self.packages)
            lines += [
                "echo '[burrow] apt-get update'",
                "apt-get update -q",
                f"echo '[burrow] apt-get install -y {packages}'",
                f"apt-get install -y -q --no-install-recommends {packages}",
                "apt-get clean",
            ]
        if self.setup.strip():
            lines += ["echo '[burrow] setup script'", "cd /workspace", self.setup]
        if self.env:
            # For the sandbox's guest, which gives them to every command it runs; and for
            # login shells (terminals), whose /etc/profile resets PATH before profile.d.
            pairs = " ".join(shlex.quote(f"{key}={value}") for key, value in self.env)
            exports = "".join(f"export {shlex.quote(f'{k}={v}')}\n" for k, v in self.env)
            folder = ENVIRONMENT_FILE.rsplit("/", 1)[0]
            lines += [
                f"mkdir -p {folder} /etc/profile.d",
                f"printf '%s\\0' {pairs} > {ENVIRONMENT_FILE}",
                f"printf '%s' {shlex.quote(exports)} > {PROFILE_FILE}",
            ]
        return "\n".join(lines) + "\n"

    @property
    def debian_suite(self) -> str | None:
        return debian_base.suite_of(self.base)

    @property
    def base_key(self) -> str | None:
        """The Debian base it stands on (None: the host's system)."""
        suite = self.debian_suite
        return None if suite is None else debian_base.key(suite, self.packages)

    def to_json(self) -> str:
        saved: dict[str, Any] = {
            "base": self.base,
            "packages": list(self.packages),
            "setup": self.setup,
            "env": dict(self.env),
        }
        if self.context:
            saved["context"] = list(self.context)
        return json.dumps(saved)

    def view(self) -> dict[str, Any]:
        return {"name": self.name, **json.loads(self.to_json())}


def saved_spec(name: str, value: str) -> EnvironmentSpec:
    """A definition as `to_json` saved it: an API body's fields, and its context (which no
    API body may name: only the sandbox host's template builds give one)."""
    body = json.loads(value)
    context = body.pop("context", []) if isinstance(body, dict) else []
    if not isinstance(context, list) or len(context) > MAX_CONTEXT_ARCHIVES:
        raise EnvironmentInvalid("invalid_environment", "context is a list of digests.")
    if not all(isinstance(d, str) and DIGEST.fullmatch(d) for d in context):
        raise EnvironmentInvalid("invalid_environment", "context holds sha256 digests only.")
    return replace(parse_spec(name, body), context=tuple(context))


def parse_spec(name: str, body: dict[str, Any]) -> EnvironmentSpec:
    """A definition from an API body, every field checked (EnvironmentInvalid says which)."""
    if not NAME.fullmatch(name):
        raise EnvironmentInvalid(
            "invalid_environment_name",
            "An environment's name is 1-32 of a-z, 0-9, '_' and '-', starting with a letter.",
        )
    unknown = set(body) - {"name", "base", "packages", "setup", "env"}
    if unknown:
        raise EnvironmentInvalid("invalid_environment", f"Unknown field(s): {sorted(unknown)}.")
    base = body.get("base", "host")
    if base != "host" and (not isinstance(base, str) or debian_base.suite_of(base) is None):
        raise EnvironmentInvalid(
            "base_not_supported",
            f"Base {base!r} is not supported: use 'host' (the host's system, with packages "
            "from its apt sources) or 'debian:<suite>' (a Debian system mmdebstrap builds, "
            "e.g. 'debian:bookworm'; the suite is 2-32 of a-z, 0-9 and '-').",
        )
    packages = body.get("packages", [])
    if not isinstance(packages, list) or len(packages) > MAX_PACKAGES:
        raise EnvironmentInvalid(
            "invalid_packages", f"packages is a list of at most {MAX_PACKAGES} names."
        )
    for package in packages:
        if not isinstance(package, str) or not PACKAGE.fullmatch(package):
            raise EnvironmentInvalid(
                "invalid_packages",
                f"{package!r} is not a Debian package name (optionally name=version).",
            )
    setup = body.get("setup", "")
    if not isinstance(setup, str) or len(setup.encode()) > MAX_SETUP_BYTES or "\0" in setup:
        raise EnvironmentInvalid(
            "invalid_setup", f"setup is a shell script of at most {MAX_SETUP_BYTES} bytes."
        )
    env = body.get("env", {})
    if not isinstance(env, dict) or len(env) > MAX_VARIABLES:
        raise EnvironmentInvalid(
            "invalid_env", f"env maps at most {MAX_VARIABLES} variable names to strings."
        )
    for key, value in env.items():
        if not VARIABLE.fullmatch(str(key)) or not isinstance(value, str):
            raise EnvironmentInvalid("invalid_env", f"env: {key!r} is not a variable name.")
        if len(value.encode()) > MAX_VALUE_BYTES or "\0" in value:
            raise EnvironmentInvalid("invalid_env", f"env: {key}'s value is too long.")
    return EnvironmentSpec(name, base, tuple(packages), setup, tuple(sorted(env.items())))


@dataclass
class Build:
    key: str
    status: Status = "building"
    detail: str = ""
    log: bytearray = field(default_factory=bytearray)
    task: asyncio.Task[None] | None = None
    listeners: list[Listener] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    on_output: Callable[[bytes], None] | None = None  # every byte of it, as it comes

    def append(self, data: bytes) -> None:
        self.log += data
        del self.log[: max(0, len(self.log) - LOG_TAIL_BYTES)]
        if self.on_output is not None:
            self.on_output(data)

    def tail(self, size: int = LOG_TAIL_BYTES) -> str:
        return self.log[-size:].decode(errors="replace")

    def last_line(self) -> str:
        lines = [line for line in self.tail(2000).splitlines() if line.strip()]
        return lines[-1][:200] if lines else ""


class Environments:
    """The server's environments and their builds."""

    def __init__(
        self,
        settings: Definitions,
        backend: Backend,
        *,
        network: NetworkPolicy | None = None,
        archives: Archives | None = None,
    ) -> None:
        self._settings = settings
        self._backend = backend
        self._network = network  # the builds' policy (None: the backend's default)
        self._archives = archives  # where builds with a context find it
        self._specs: dict[str, EnvironmentSpec] = {}
        self._builds: dict[str, Build] = {}  # by name: the current definition's
        self._lock = asyncio.Lock()
        self._base_locks: dict[str, asyncio.Lock] = {}

    @property
    def supported(self) -> bool:
        return isinstance(self._backend, EnvironmentLayers)

    async def load(self) -> None:
        """The definitions saved in settings; those not built yet start building."""
        for name, value in (await self._settings.all()).items():
            if name.startswith(SETTING_PREFIX) and value:
                with contextlib.suppress(EnvironmentInvalid, ValueError):
                    spec = saved_spec(name[len(SETTING_PREFIX) :], value)
                    self._specs[spec.name] = spec
                    self._ensure_build(spec)
        await self._collect()

    def specs(self) -> list[EnvironmentSpec]:
        return [self._specs[name] for name in sorted(self._specs)]

    def get(self, name: str) -> EnvironmentSpec | None:
        return self._specs.get(name)

    def build_of(self, name: str) -> Build | None:
        return self._builds.get(name)

    async def put(self, spec: EnvironmentSpec) -> None:
        """Save a definition; a new or changed one is built (an unchanged one is not)."""
        self._check_supported()
        async with self._lock:
            await self._settings.put({SETTING_PREFIX + spec.name: spec.to_json()})
            old = self._builds.get(spec.name)
            if old is not None and old.key != spec.key:
                await self._stop(old)
                del self._builds[spec.name]
            if old is not None and old.key == spec.key and old.status in ("failed", "cancelled"):
                del self._builds[spec.name]  # saved again as it was: try once more
            self._specs[spec.name] = spec
            self._ensure_build(spec)

    async def delete(self, name: str) -> bool:
        """Forget it (its running build is cancelled). Sandboxes that started on it keep
        their layer: the backend removes none a sandbox still stands on."""
        async with self._lock:
            if self._specs.pop(name, None) is None:
                return False
            await self._settings.put({SETTING_PREFIX + name: None})
            build = self._builds.pop(name, None)
            if build is not None:
                await self._stop(build)
        await self._collect()
        return True

    async def cancel(self, name: str) -> bool:
        build = self._builds.get(name)
        if build is None or build.status != "building":
            return False
        await self._stop(build)
        return True

    async def key_for(self, name: str, listener: Listener | None = None) -> str:
        """The built layer a new sandbox of `name` starts from, once its build is done;
        `listener` hears the build's stages meanwhile."""
        spec = self._specs.get(name)
        if spec is None:
            raise EnvironmentUnavailable(
                f"The environment {name!r} does not exist (any more): choose another one "
                "for this conversation, or ask an administrator to define it."
            )
        build = self._ensure_build(spec)
        if build.status == "building" and listener is not None:
            build.listeners.append(listener)
            await listener("started", f"Building the environment {name}")
        try:
            await build.done.wait()
        finally:
            if listener is not None and listener in build.listeners:
                build.listeners.remove(listener)
        if build.status != "ready":
            raise EnvironmentUnavailable(
                f"The environment {name} is not available: {build.detail} "
                "An administrator can fix its definition (PATCH /api/environments/"
                f"{name}), then restart this sandbox."
            )
        return build.key

    async def close(self) -> None:
        for build in list(self._builds.values()):
            await self._stop(build)

    async def _collect(self) -> None:
        """Builds of no definition that no sandbox stands on are removed: a changed or
        deleted environment's old build goes once its last conversation is deleted (or
        at the next collection after that)."""
        layers = self._backend
        if isinstance(layers, EnvironmentLayers):
            keep = {spec.key for spec in self._specs.values()}
            keep |= {spec.base_key for spec in self._specs.values() if spec.base_key}
            if isinstance(layers, debian_base.BaseStore):  # bases of builds still kept
                keep |= _bases_named(layers.environments_dir())
            removed = await layers.collect_environments(keep)
            if removed:
                log.info("removed %d unused environment build(s)", len(removed))

    def _check_supported(self) -> None:
        if not self.supported:
            raise EnvironmentInvalid(
                "environments_not_supported",
                f"The {self._backend.name} sandbox backend does not build environments: "
                "use the local backend, or a template of the E2B endpoint.",
            )

    def _ensure_build(self, spec: EnvironmentSpec) -> Build:
        build = self._builds.get(spec.name)
        if build is not None and build.key == spec.key:
            return build
        build = Build(spec.key)
        self._builds[spec.name] = build
        layers = self._backend if isinstance(self._backend, EnvironmentLayers) else None
        if layers is None:
            self._finish(build, "failed", "this sandbox backend does not build environments.")
        elif self._built(spec, layers):
            self._finish(build, "ready", "built")
        else:
            build.task = asyncio.create_task(self._build(spec, build, layers))
        return build

    def _built(self, spec: EnvironmentSpec, layers: EnvironmentLayers) -> bool:
        """Its layer is saved (and, on a Debian base, names that base: a build interrupted
        between the two is finished by building again, which saves nothing twice)."""
        if not layers.environment_exists(spec.key):
            return False
        store = self._backend
        if spec.base_key is None or not isinstance(store, debian_base.BaseStore):
            return True
        return debian_base.base_of(store.environments_dir() / spec.key) == spec.base_key

    async def _stop(self, build: Build) -> None:
        task = build.task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _build(self, spec: EnvironmentSpec, build: Build, layers: EnvironmentLayers) -> None:
        sandbox_id = f"environment-{spec.key}"
        began = time.monotonic()
        try:
            await self._backend.destroy(sandbox_id)  # what an interrupted build left
            await self._tell(build, "started", f"Building the environment {spec.name}")
            base = await self._debian_base(spec, build)
            sandbox = await self._backend.create(
                sandbox_id, network=self._network, environment=base
            )
            missing = await self._stage_context(spec, sandbox)
            if missing:
                await self._end(build, "failed", f"its build context {missing} is gone.")
                return
            request = ExecRequest(
                argv=["/bin/bash", "-c", spec.script()],
                cwd="/workspace",
                env=dict(spec.env),
                timeout=BUILD_TIMEOUT_SECONDS,
            )
            exit_code = await follow(
                sandbox.exec(request), build, lambda line: self._tell(build, "progress", line)
            )
            if exit_code != 0:
                tail = build.tail(FAILURE_TAIL_BYTES).strip()
                await self._end(build, "failed", f"its build exited with {exit_code}:\n{tail}")
                return
            await sandbox.stop()
            await layers.save_environment(sandbox_id, spec.key)
            if base is not None:
                assert isinstance(self._backend, debian_base.BaseStore)
                debian_base.mark(self._backend.environments_dir() / spec.key, base)
            await self._end(build, "ready", f"built in {time.monotonic() - began:.0f} s")
            await self._collect()
        except asyncio.CancelledError:
            await asyncio.shield(self._end(build, "cancelled", "its build was cancelled."))
            raise
        except debian_base.BuildFailed as exc:
            tail = build.tail(FAILURE_TAIL_BYTES).strip()
            await self._end(build, "failed", f"its Debian base failed: {exc.message}:\n{tail}")
        except SandboxError as exc:
            await self._end(build, "failed", f"its build sandbox failed: {exc.message}")
        except Exception as exc:  # a build must end in a status, whatever broke
            log.exception("environment %s: build failed", spec.name)
            await self._end(build, "failed", f"its build failed: {exc}")
        finally:
            with contextlib.suppress(SandboxError):
                await asyncio.shield(self._backend.destroy(sandbox_id))

    async def _debian_base(self, spec: EnvironmentSpec, build: Build) -> str | None:
        """The Debian base the build stands on, built first when it is not there (one
        build of a base at a time: two environments on the same wait for one); None for
        the host's system."""
        base, suite = spec.base_key, spec.debian_suite
        if base is None or suite is None:
            return None
        store = self._backend
        if not isinstance(store, debian_base.BaseStore):
            raise debian_base.BuildFailed(f"the {self._backend.name} backend has no Debian bases")
        missing = store.root_unavailable()
        ids = store.id_range()
        if missing or ids is None:
            raise debian_base.BuildFailed(
                f"a Debian base needs sandboxes with a writable root, and here {missing}"
            )
        directory = store.environments_dir() / base
        async with self._base_locks.setdefault(base, asyncio.Lock()):
            if (directory / debian_base.ROOTFS).is_dir():
                build.append(f"[burrow] Debian base {base}: built already\n".encode())
                return base
            began = time.monotonic()
            await self._tell(build, "progress", f"Building the Debian base {suite}")
            making = debian_base.build(directory, suite, spec.packages, ids, build.append)
            await pulse(making, build, lambda line: self._tell(build, "progress", line))
            build.append(
                f"[burrow] Debian base {base} built in {time.monotonic() - began:.0f} s\n".encode()
            )
        return base

    async def _stage_context(self, spec: EnvironmentSpec, sandbox: Sandbox) -> str | None:
        """The context's archives written into the build sandbox; the digest of the first
        that is missing, if one is."""
        for digest in spec.context:
            path = None if self._archives is None else self._archives.archive(digest)
            if path is None:
                return digest
            data = await asyncio.to_thread(path.read_bytes)
            await sandbox.write_file(CONTEXT_PREFIX + digest, data)
        return None

    async def _end(self, build: Build, status: Status, detail: str) -> None:
        """The build's last word to its listeners, then its end to whoever waits on it."""
        build.status, build.detail = status, detail
        told = f"The environment is ready ({detail})" if status == "ready" else detail
        await self._tell(build, "done" if status == "ready" else "failed", told)
        build.done.set()

    def _finish(self, build: Build, status: Status, detail: str) -> None:
        build.status, build.detail = status, detail
        build.done.set()

    async def _tell(self, build: Build, stage: Stage, detail: str) -> None:
        for listener in list(build.listeners):
            try:
                await listener(stage, detail)
            except Exception:  # one conversation's journal must not stop the build
                log.exception("an environment build's listener failed")


async def follow(events: Any, build: Build, progress: Callable[[str], Awaitable[None]]) -> int:
    """A build script's exit, its output collected into `build`; every PROGRESS_SECONDS
    `progress` hears its last line (or how long it has run, while it is quiet)."""
    exit_code = -1
    began = time.monotonic()

    async def consume() -> None:
        nonlocal exit_code
        async with closing_exec(events) as stream:
            async for event in stream:
                if isinstance(event, ExecChunk):
                    build.append(event.data)
                elif isinstance(event, ExecExit):
                    exit_code = event.exit_code if event.exit_code is not None else -1
                    if event.timed_out:
                        build.append(b"\n[burrow] the build ran past its time limit\n")

    await pulse(consume(), build, progress, began)
    return exit_code


async def pulse(
    work: Awaitable[None],
    build: Build,
    progress: Callable[[str], Awaitable[None]],
    began: float | None = None,
) -> None:
    """Await `work`; every PROGRESS_SECONDS meanwhile `progress` hears the build's last
    line (or how long it has run, while it is quiet). Cancelled, it cancels `work`."""
    began = time.monotonic() if began is None else began
    running = asyncio.ensure_future(work)
    try:
        while not (await asyncio.wait({running}, timeout=PROGRESS_SECONDS))[0]:
            await progress(build.last_line() or f"running ({time.monotonic() - began:.0f} s)")
        running.result()
    finally:
        if not running.done():
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running


def _bases_named(environments: Path) -> set[str]:
    """The Debian bases that environment builds on disk stand on (a kept build's base
    must stay; it goes at the collection after its last build is gone)."""
    if not environments.is_dir():
        return set()
    named = (debian_base.base_of(build) for build in environments.iterdir())
    return {key for key in named if key is not None}
