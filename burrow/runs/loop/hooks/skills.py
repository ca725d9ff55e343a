"""Skills: folders holding a `SKILL.md` that teach the model a procedure on demand.

A `SKILL.md` starts with front matter naming the skill and saying when to use it (the
format Claude Code and others use), then the instructions in markdown:

    ---
    name: release-notes
    description: Write release notes from the git log. Use when asked for a changelog.
    ---
    # Release notes
    ...

Skills come from `<data-dir>/skills/` (the administrator's) and from the workspace's
`.burrow/skills/` (the project's, read through the sandbox like AGENTS.md: untrusted, so
bounded in number and size, never followed outside the workspace). Names and descriptions
go into the system prompt; the `skill` tool loads a body when the model wants it. On a name
both define, the administrator's skill wins.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from burrow.llm.base import Message, ToolSpec
from burrow.runs.loop.hooks.base import Hook, Run
from burrow.runs.loop.hooks.instructions import instructions_text
from burrow.sandbox.backend import Sandbox, SandboxError
from burrow.tools.arguments import json_schema, parse_arguments
from burrow.tools.base import Tool, ToolContext, ToolError, ToolKind, ToolResult

log = logging.getLogger(__name__)

SKILL_TOOL = "skill"
SKILL_FILE = "SKILL.md"
WORKSPACE_SKILLS = ".burrow/skills"
MAX_SKILLS = 50  # per source; more are left out (and said so in the prompt)
MAX_SKILL_BYTES = 64 * 1024  # of one SKILL.md; a longer body is cut with a note
HEAD_BYTES = 4 * 1024  # read to find the front matter
MAX_DESCRIPTION = 1024  # characters
MAX_LISTING = 8 * 1024  # characters of the system prompt's skill list
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")

HEADER = (
    "# Skills\n\nSkills are instructions for particular tasks. When one fits the task, load "
    "it with the skill tool before you start, then follow it."
)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    source: Literal["data", "workspace"]
    path: str  # a host path (data) or a workspace-relative one


def front_matter(text: str) -> dict[str, str] | None:
    """The `key: value` pairs between the leading `---` lines (quoted values unquoted,
    `>`/`|` blocks joined), or None when the text does not start with front matter.
    Only what skills need of YAML: flat string fields."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    fields: dict[str, str] = {}
    key: str | None = None
    block: list[str] = []
    for line in lines[1:]:
        if line.strip() == "---":
            if key is not None:
                fields[key] = " ".join(block).strip()
            return fields
        if key is not None and (line.startswith((" ", "\t")) or not line.strip()):
            block.append(line.strip())
            continue
        if key is not None:
            fields[key] = " ".join(block).strip()
            key = None
        name, sep, value = line.partition(":")
        if not sep:
            continue
        value = value.strip()
        if value in (">", "|", ">-", "|-"):
            key, block = name.strip(), []
        else:
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            fields[name.strip()] = value
    return None  # never closed


def parse_skill(text: str, source: Literal["data", "workspace"], path: str) -> Skill | None:
    fields = front_matter(text)
    if fields is None:
        return None
    name, description = fields.get("name", ""), fields.get("description", "")
    if not NAME.fullmatch(name) or not description:
        return None
    return Skill(name, description[:MAX_DESCRIPTION], source, path)


def read_head(path: Path, limit: int) -> bytes:
    with path.open("rb") as file:
        return file.read(limit)


def data_skills(root: Path) -> list[Skill]:
    """The administrator's skills: `root/<folder>/SKILL.md`."""
    found: list[Skill] = []
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return found
    for folder in folders[:MAX_SKILLS]:
        path = folder / SKILL_FILE
        try:
            head = read_head(path, HEAD_BYTES)
        except OSError:
            continue
        skill = parse_skill(head.decode("utf-8", "replace"), "data", str(path))
        if skill is None:
            log.info("%s has no valid front matter (name, description); skipped", path)
        else:
            found.append(skill)
    return found


async def workspace_skills(sandbox: Sandbox) -> list[Skill]:
    """The project's skills, read through the sandbox (its file API stays in the
    workspace): `.burrow/skills/<folder>/SKILL.md`."""
    found: list[Skill] = []
    try:
        entries = await sandbox.list_dir(WORKSPACE_SKILLS)
    except SandboxError:
        return found
    folders = sorted(e.name for e in entries if e.kind == "dir")
    for folder in folders[:MAX_SKILLS]:
        path = f"{WORKSPACE_SKILLS}/{folder}/{SKILL_FILE}"
        try:
            if (await sandbox.stat(path)).kind != "file":  # a FIFO would block the read
                continue
            head = await sandbox.read_file(path, 0, HEAD_BYTES)
        except SandboxError:
            continue
        skill = parse_skill(head.decode("utf-8", "replace"), "workspace", path)
        if skill is not None:
            found.append(skill)
    return found


def listing(skills: list[Skill], limit: int = MAX_LISTING) -> str:
    """The system prompt's section: one line per skill, cut at `limit` characters."""
    lines = [HEADER, ""]
    size = sum(len(line) + 1 for line in lines)
    for i, skill in enumerate(skills):
        line = f"- {skill.name}: {skill.description}"
        if size + len(line) + 1 > limit:
            lines.append(f"({len(skills) - i} more skills are not listed.)")
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


class SkillArguments(BaseModel):
    name: str = Field(max_length=64, description="The skill's name, as listed.")


class Skills(Hook):
    """Finds the skills before a run's first model call, lists them in its system prompt,
    and provides the `skill` tool that loads one. `allowed`: the names a profile allows
    (None: every skill)."""

    def __init__(
        self,
        data_dir: Path | None,
        sandbox: Callable[[], Awaitable[Sandbox]],
        allowed: frozenset[str] | None = None,
    ) -> None:
        self._data_dir = data_dir
        self._sandbox = sandbox
        self._allowed = allowed
        self._loaded = False
        self.found: dict[str, Skill] = {}
        self.tool = SkillTool(self)

    def tools(self, tools: Mapping[str, Tool]) -> dict[str, Tool]:
        return {**tools, SKILL_TOOL: self.tool}

    async def before_model_call(self, run: Run) -> None:
        if self._loaded:
            return
        self._loaded = True
        found = await asyncio.to_thread(data_skills, self._data_dir) if self._data_dir else []
        try:
            found += await workspace_skills(await self._sandbox())
        except SandboxError as exc:
            log.info("workspace skills of %s not read: %s", run.cid, exc.message)
        for skill in found:
            if self._allowed is None or skill.name in self._allowed:
                self.found.setdefault(skill.name, skill)  # the administrator's first

    def transform_tools(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        if self.found:
            return specs
        return [spec for spec in specs if spec.name != SKILL_TOOL]  # nothing to load

    def transform_context(self, messages: list[Message]) -> list[Message]:
        if not self.found:
            return messages
        addition = listing(list(self.found.values()))
        if messages and messages[0].role == "system":
            return [
                Message(role="system", content=f"{messages[0].content}\n\n{addition}"),
                *messages[1:],
            ]
        return [Message(role="system", content=addition), *messages]

    async def body(self, name: str) -> str:
        skill = self.found.get(name)
        if skill is None:
            known = ", ".join(sorted(self.found)) or "none"
            raise ToolError(f"No skill named {name!r}. Available: {known}.")
        try:
            if skill.source == "data":
                data = await asyncio.to_thread(read_head, Path(skill.path), MAX_SKILL_BYTES + 1)
            else:
                sandbox = await self._sandbox()
                if (await sandbox.stat(skill.path)).kind != "file":
                    raise ToolError(f"The skill {name!r} is no longer a file.")
                data = await sandbox.read_file(skill.path, 0, MAX_SKILL_BYTES + 1)
        except OSError as exc:
            raise ToolError(f"The skill {name!r} could not be read: {exc.strerror}") from exc
        text = instructions_text(data, MAX_SKILL_BYTES, f"The skill {name!r}")
        if text is None:
            raise ToolError(f"The skill {name!r} is not UTF-8 text.")
        return text


class SkillTool:
    spec = ToolSpec(
        SKILL_TOOL,
        "Load a skill's instructions by name (the skills are listed in the system prompt).",
        json_schema(SkillArguments),
    )
    kind = ToolKind(reads=True)

    def __init__(self, skills: Skills) -> None:
        self._skills = skills

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        parsed = parse_arguments(SkillArguments, arguments, SKILL_TOOL)
        return ToolResult(output=await self._skills.body(parsed.name))
