"""The tools a conversation gets by default, and their specs for the model."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from burrow.llm.base import ToolSpec
from burrow.tools.base import Tool, ToolKind
from burrow.tools.bash import BashTool
from burrow.tools.files import EditFileTool, ReadFileTool, WriteFileTool
from burrow.tools.preview import PreviewTool
from burrow.tools.todo import TodoTool


def default_tools() -> dict[str, Tool]:
    tools: list[Tool] = [
        BashTool(),
        ReadFileTool(),
        WriteFileTool(),
        EditFileTool(),
        PreviewTool(),
        TodoTool(),
    ]
    return {tool.spec.name: tool for tool in tools}


def tool_specs(tools: Mapping[str, Tool] | None = None) -> list[ToolSpec]:
    """What the model is told it may call (the default tools unless given)."""
    return [tool.spec for tool in (tools if tools is not None else default_tools()).values()]


@cache
def _default_kinds() -> dict[str, ToolKind]:
    return {name: tool.kind for name, tool in default_tools().items()}


def declared_kind(name: str) -> ToolKind:
    """The flags the default tool called `name` declares; none for a name it does not know."""
    return _default_kinds().get(name, ToolKind())
