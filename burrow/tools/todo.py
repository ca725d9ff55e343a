"""`todo`: the model's own checklist for the task at hand (DESIGN §9 plan mode).

The tool touches nothing: it checks the list and hands it back in `extra["todo"]`, and the
run's `Checklist` hook journals it as `plan.updated` so the timeline shows it live. Each
call sends the whole list (the model rewrites it, ticking items), so the latest call is the
list; in plan mode the latest list is the plan that is proposed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from burrow.llm.base import ToolSpec
from burrow.tools.arguments import json_schema, parse_arguments
from burrow.tools.base import ToolContext, ToolKind, ToolResult

TODO_TOOL = "todo"
MAX_ITEMS = 100  # a checklist, not a document: bounded so one call cannot flood the journal
MAX_TEXT = 500  # characters per item


class TodoItem(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="One step, in a line.")
    done: bool = Field(default=False, description="True once the step is finished.")


class TodoArguments(BaseModel):
    items: list[TodoItem] = Field(
        max_length=MAX_ITEMS,
        description="The whole checklist, in order, every call (not only what changed).",
    )


def summary(items: list[dict[str, Any]]) -> str:
    """The checklist as the model reads it back."""
    done = sum(1 for item in items if item["done"])
    lines = [f"[{'x' if item['done'] else ' '}] {item['text']}" for item in items]
    return "\n".join([f"Checklist saved ({done}/{len(items)} done):", *lines])


class TodoTool:
    spec = ToolSpec(
        TODO_TOOL,
        "Keep your checklist for this task: send the whole list of steps each time, "
        "marking a step done as you finish it. The user sees it live.",
        json_schema(TodoArguments),
    )
    # It reads and writes nothing, but no flags at all would mean "undeclared, judged as
    # writing"; `reads` is the closest honest declaration, so every mode allows it.
    kind = ToolKind(reads=True)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        parsed = parse_arguments(TodoArguments, arguments, TODO_TOOL)
        items = [item.model_dump() for item in parsed.items]
        return ToolResult(output=summary(items), extra={"todo": items})
