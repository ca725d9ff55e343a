"""What a conversation's profile does to its runs.

The profile is looked up when a run starts, so an edited profile applies from the next
run. Its system prompt replaces Burrow's; its model is used when the conversation chose
none; its tool allowlist (names, or patterns with `*` such as `mcp__github__*`) narrows
the tools offered and refuses a call to any other (a model may name a tool it was not
offered); its skills narrow the skills listed. Its
approval mode is copied to the conversation when the profile is chosen (the API does
that), so a mode set on the conversation afterwards wins.
"""

from __future__ import annotations

import fnmatch
from typing import Protocol

from burrow.llm.base import ToolSpec
from burrow.runs.loop.hooks.base import Call, Hook, Run
from burrow.store.profiles import Profile

DEFAULT_PROFILE = "default"  # no profile: Burrow's own setup


class ProfileLookup(Protocol):
    async def find(self, user_id: str, name: str) -> Profile | None: ...


class ProfileMissing(Exception):
    """The conversation's profile was deleted since it was chosen."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"The profile {name!r} of this conversation no longer exists: choose another "
            "one in the conversation's settings (PATCH profile), then send the message again."
        )


class ToolAllowlist(Hook):
    """Offers only the profile's tools and refuses a call to any other. First among the
    hooks: a refused call is never put to the owner for approval."""

    def __init__(self, profile: str, allowed: frozenset[str]) -> None:
        self.profile = profile
        self.allowed = allowed

    def allows(self, name: str) -> bool:
        """A name listed, or matched by a listed pattern (`mcp__github__*`)."""
        return name in self.allowed or any(
            "*" in pattern and fnmatch.fnmatchcase(name, pattern) for pattern in self.allowed
        )

    def transform_tools(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        return [spec for spec in specs if self.allows(spec.name)]

    async def before_tool_call(self, run: Run, call: Call) -> str | None:
        if self.allows(call.name):
            return None
        shown = ", ".join(sorted(self.allowed)) or "none"
        return (
            f"Refused: the profile {self.profile!r} does not allow the tool {call.name!r}. "
            f"Allowed tools: {shown}."
        )
