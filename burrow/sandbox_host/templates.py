"""E2B templates on the sandbox host: the SDK's `Template.build` served on Burrow's
environments (runs/workspace/environments.py), so a template is a cached layer a sandbox
starts from as fast as from the host's system.

The SDK's flow: `POST /v3/templates` names the template and opens a build; each COPY asks
`GET /templates/{id}/files/{filesHash}` whether its files are here and, when not, PUTs a tar
to the URL it gets (one-use, the API key not needed, bounded like an upload); `POST
/v2/templates/{id}/builds/{buildID}` starts the build with its steps (template_recipe.py);
`GET …/builds/{buildID}/status?logsOffset=` is polled for its logs and its end.

Templates belong to the API key that built them: another key's is as absent as a missing
one. Uploads are kept by the sha256 of their bytes (the SDK's `filesHash` is of the files
and unchecked, so it only finds a key's own upload), and a build names its archives by
that: the same bytes are the same layer, whoever sent them. What the host knows of its
templates is saved in `templates.json` beside them, so a restart keeps them, built.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from burrow.runs.workspace.environments import (
    DIGEST,
    Environments,
    EnvironmentSpec,
    EnvironmentUnavailable,
    JsonDefinitions,
    Stage,
    saved_spec,
)
from burrow.sandbox.backend import Backend, NetworkPolicy
from burrow.sandbox_host import template_archive
from burrow.sandbox_host.template_recipe import TemplateRecipe, TemplateRefused, read_build

log = logging.getLogger(__name__)

MAX_TEMPLATES_PER_KEY = 50
MAX_LOG_ENTRIES = 10_000  # a build's log lines kept (the status route pages them)
PAGE_ENTRIES = 100  # per status answer, as E2B's
UPLOAD_SECONDS = 3600.0  # an upload URL's life
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-_.")

BuildStatus = Literal["waiting", "building", "ready", "error"]


class TemplateError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class TemplateBuild:
    build_id: str
    status: BuildStatus = "waiting"
    reason: str = ""
    created: float = field(default_factory=time.time)
    logs: list[tuple[float, str, str]] = field(default_factory=list)  # (at, level, message)
    partial: bytes = b""  # output after its last newline

    def say(self, message: str, level: str = "info") -> None:
        if len(self.logs) < MAX_LOG_ENTRIES:
            self.logs.append((time.time(), level, message[:4000]))
        elif len(self.logs) == MAX_LOG_ENTRIES:
            self.logs.append((time.time(), "warn", "[burrow] more output than is kept"))

    def output(self, data: bytes) -> None:
        *lines, self.partial = (self.partial + data).split(b"\n")
        for line in lines:
            self.say(line.decode(errors="replace").rstrip("\r"))
        if len(self.partial) > 4000:  # a line without end is still shown
            self.say(self.partial.decode(errors="replace"))
            self.partial = b""


@dataclass
class Template:
    template_id: str
    owner: str
    names: list[str]
    builds: dict[str, TemplateBuild] = field(default_factory=dict)
    ready: TemplateRecipe | None = None  # the last build that finished well
    ready_key: str = ""  # its environment build

    @property
    def environment(self) -> str:
        return f"t{self.template_id}"

    def record(self) -> dict[str, Any]:
        ready = self.ready
        return {
            "template_id": self.template_id,
            "owner": self.owner,
            "names": self.names,
            "builds": {
                b.build_id: {"status": b.status, "reason": b.reason, "created": b.created}
                for b in self.builds.values()
            },
            "ready": None
            if ready is None
            else {"spec": ready.spec.to_json(), "workdir": ready.workdir, "user": ready.user},
            "ready_key": self.ready_key,
        }


class Templates:
    """A host's templates, their builds and their uploads."""

    def __init__(
        self,
        backend: Backend,
        folder: Path,
        *,
        network: NetworkPolicy | None = None,
        max_upload_bytes: int = 64 << 20,
    ) -> None:
        self.folder = folder
        self.max_upload_bytes = max_upload_bytes
        self._templates: dict[str, Template] = {}
        self._uploads: dict[str, tuple[str, str, str, float]] = {}  # token -> owner, id, hash
        self._watchers: set[asyncio.Task[None]] = set()
        self.environments = Environments(
            JsonDefinitions(folder / "environments.json"), backend, network=network, archives=self
        )

    # -- the environments' side -----------------------------------------------------------

    def archive(self, digest: str) -> Path | None:
        path = self.folder / "archives" / digest
        return path if DIGEST.fullmatch(digest) and path.is_file() else None

    # -- state ----------------------------------------------------------------------------

    async def load(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        saved = self.folder / "templates.json"
        if saved.is_file():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                for entry in json.loads(saved.read_text()):
                    template = _template_of(entry)
                    self._templates[template.template_id] = template
        await self.environments.load()
        for template in self._templates.values():
            for build in template.builds.values():
                if build.status in ("waiting", "building"):
                    build.status, build.reason = "error", "the host restarted during the build"

    def _save(self) -> None:
        target = self.folder / "templates.json"
        temporary = target.with_suffix(".tmp")
        temporary.write_text(json.dumps([t.record() for t in self._templates.values()]))
        os.replace(temporary, target)

    async def close(self) -> None:
        for task in list(self._watchers):
            task.cancel()
        await self.environments.close()

    # -- lookups ----------------------------------------------------------------------------

    def find(self, owner: str, ref: str) -> Template | None:
        """The key's template by id or by name (`name:tag` is the name's)."""
        found = self._templates.get(ref)
        if found is not None and found.owner == owner:
            return found
        name = ref.split(":", 1)[0]
        for template in self._templates.values():
            if template.owner == owner and name in template.names:
                return template
        return None

    def owned(self, owner: str, template_id: str) -> Template:
        template = self.find(owner, template_id)
        if template is None:
            raise TemplateError(404, "template_not_found", f"Template {template_id} not found")
        return template

    def listed(self, owner: str) -> list[Template]:
        return [t for t in self._templates.values() if t.owner == owner]

    def startable(self, owner: str, ref: str) -> Template | None:
        """The template a sandbox of `ref` starts from; TemplateError while it has no build."""
        template = self.find(owner, ref)
        if template is None:
            return None
        if template.ready is None:
            building = any(b.status in ("waiting", "building") for b in template.builds.values())
            raise TemplateError(
                400,
                "template_not_ready",
                f"Template {ref} has no finished build"
                + (" yet: it is building." if building else ": build it again."),
            )
        return template

    # -- the build's steps ----------------------------------------------------------------

    def request(self, owner: str, name: str, tags: list[str]) -> tuple[Template, TemplateBuild]:
        """A new build of the template called `name` (made when the key has none)."""
        base = name.split(":", 1)[0]
        if not base or len(base) > 64 or not set(base) <= NAME_CHARS:
            raise TemplateError(
                400, "invalid_name", "A template name is 1-64 of a-z, 0-9, '-', '_' and '.'."
            )
        template = self.find(owner, base)
        if template is None:
            if len(self.listed(owner)) >= MAX_TEMPLATES_PER_KEY:
                raise TemplateError(
                    429, "template_limit", f"This key has {MAX_TEMPLATES_PER_KEY} templates."
                )
            template = Template(secrets.token_hex(10), owner, [base])
            self._templates[template.template_id] = template
        build = TemplateBuild(secrets.token_hex(12))
        template.builds = {b.build_id: b for b in list(template.builds.values())[-9:]}
        template.builds[build.build_id] = build
        self._save()
        return template, build

    def upload_token(self, owner: str, template_id: str, files_hash: str) -> str | None:
        """None when the key's files of `files_hash` are here; else a one-use upload token."""
        template = self.owned(owner, template_id)
        if not DIGEST.fullmatch(files_hash):
            raise TemplateError(400, "invalid_hash", "The files hash is a sha256 (64 hex).")
        if self._archive_of(owner, files_hash) is not None:
            return None
        now = time.monotonic()
        self._uploads = {k: v for k, v in self._uploads.items() if v[3] > now}
        token = secrets.token_urlsafe(24)
        self._uploads[token] = (owner, template.template_id, files_hash, now + UPLOAD_SECONDS)
        return token

    async def receive(self, token: str, body: AsyncIterator[bytes]) -> None:
        """An upload to its one-use URL: kept by its bytes' sha256, bounded in size."""
        entry = self._uploads.pop(token, None)
        if entry is None or entry[3] < time.monotonic():
            raise TemplateError(403, "forbidden", "This upload URL is unknown, used or expired.")
        owner, _, files_hash, _ = entry
        archives = self.folder / "archives"
        archives.mkdir(parents=True, exist_ok=True)
        partial = archives / f".{secrets.token_hex(8)}"
        digest, size = hashlib.sha256(), 0
        try:
            with partial.open("wb") as out:
                async for chunk in body:
                    size += len(chunk)
                    if size > self.max_upload_bytes:
                        raise TemplateError(
                            413,
                            "too_large",
                            f"The files come to over {self.max_upload_bytes >> 20} MiB, this "
                            "host's cap (BURROW_SANDBOX_HOST_MAX_UPLOAD_MB).",
                        )
                    digest.update(chunk)
                    out.write(chunk)
            try:  # what it unpacks to, before it is kept (template_archive.py)
                await asyncio.to_thread(template_archive.check, partial, self.max_upload_bytes)
            except template_archive.ArchiveRefused as exc:
                code = "too_large" if exc.status == 413 else "invalid_files"
                raise TemplateError(exc.status, code, exc.message) from None
            os.replace(partial, archives / digest.hexdigest())
        finally:
            partial.unlink(missing_ok=True)
        index = self._index(owner)
        index.mkdir(parents=True, exist_ok=True)
        (index / files_hash).write_text(digest.hexdigest())

    def _index(self, owner: str) -> Path:
        return self.folder / "uploads" / hashlib.sha256(owner.encode()).hexdigest()[:24]

    def _archive_of(self, owner: str, files_hash: str) -> str | None:
        try:
            archive = (self._index(owner) / files_hash).read_text().strip()
        except OSError:
            return None
        return archive if self.archive(archive) is not None else None

    async def start(self, owner: str, template_id: str, build_id: str, body: Any) -> None:
        template = self.owned(owner, template_id)
        build = template.builds.get(build_id)
        if build is None:
            raise TemplateError(404, "build_not_found", f"Build {build_id} not found")
        if build.status != "waiting":
            raise TemplateError(409, "build_started", f"Build {build_id} was started already.")
        if not isinstance(body, dict):
            raise TemplateError(400, "invalid_request", "The build is a JSON object.")

        def base(ref: str) -> TemplateRecipe | None:
            parent = self.find(owner, ref)
            return None if parent is None else parent.ready

        try:
            recipe = read_build(
                template.environment,
                body,
                base_template=base,
                archive_of=lambda h: self._archive_of(owner, h),
            )
        except TemplateRefused as exc:
            raise TemplateError(400, "invalid_template", str(exc)) from None
        build.status = "building"
        build.say(f"[burrow] building template {template.names[0]} ({template_id})")
        await self.environments.put(recipe.spec)
        environment = self.environments.build_of(template.environment)
        if environment is not None:
            environment.on_output = build.output
            if environment.status == "ready":
                build.say("[burrow] built before: nothing runs again (skip_cache() builds anew)")
        task = asyncio.create_task(self._watch(template, build, recipe))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)
        self._save()

    async def _watch(
        self, template: Template, build: TemplateBuild, recipe: TemplateRecipe
    ) -> None:
        async def told(stage: Stage, detail: str) -> None:
            if stage != "progress":  # the output's own lines say more
                build.say(f"[burrow] {detail}", "error" if stage == "failed" else "info")

        try:
            key = await self.environments.key_for(template.environment, told)
        except EnvironmentUnavailable as exc:
            build.status, build.reason = "error", str(exc)
        else:
            if build.partial:
                build.output(b"\n")
            build.status = "ready"
            template.ready, template.ready_key = recipe, key
            build.say("[burrow] the template is ready")
        self._save()

    def status(self, owner: str, template_id: str, build_id: str, offset: int) -> dict[str, Any]:
        template = self.owned(owner, template_id)
        build = template.builds.get(build_id)
        if build is None:
            raise TemplateError(404, "build_not_found", f"Build {build_id} not found")
        page = build.logs[max(0, offset) : max(0, offset) + PAGE_ENTRIES]
        entries = [
            {"timestamp": _iso(at), "level": level, "message": message}
            for at, level, message in page
        ]
        answer: dict[str, Any] = {
            "templateID": template.template_id,
            "buildID": build.build_id,
            "status": build.status,
            "logs": [entry["message"] for entry in entries],
            "logEntries": entries,
        }
        if build.status == "error":
            answer["reason"] = {"message": build.reason or "The build failed."}
        return answer

    async def delete(self, owner: str, ref: str) -> None:
        """Forget it; its layer goes once no sandbox stands on it (environments.py)."""
        template = self.owned(owner, ref)
        del self._templates[template.template_id]
        self._save()
        await self.environments.delete(template.environment)


def _template_of(entry: dict[str, Any]) -> Template:
    template = Template(entry["template_id"], entry["owner"], list(entry["names"]))
    for build_id, saved in entry.get("builds", {}).items():
        template.builds[build_id] = TemplateBuild(
            build_id, saved["status"], saved.get("reason", ""), saved.get("created", 0.0)
        )
    ready = entry.get("ready")
    if ready:
        spec: EnvironmentSpec = saved_spec(template.environment, ready["spec"])
        template.ready = TemplateRecipe(replace(spec), ready["workdir"], ready["user"])
        template.ready_key = entry.get("ready_key", "")
    return template


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
