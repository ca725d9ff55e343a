"""An automation's prompt: `{{field.path}}` placeholders filled from the trigger's JSON
payload. Substitution only — no expressions, filters or calls — and each value goes in as
text, once: a value that itself contains `{{…}}` is not expanded again, so a payload (an
issue body, say) cannot reach other fields or change the automation's settings.

A path that is missing from the payload, or names an object or a list, renders as the
empty string (a schedule has no payload; a prompt written for a webhook still renders).
Objects and lists under a path render as their JSON text."""

from __future__ import annotations

import json
import re
from typing import Any

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
MAX_RENDERED = 100_000  # characters: a first message, not a document


def _lookup(payload: Any, path: str) -> str:
    value = payload
    for key in path.split("."):
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return ""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def render(template: str, payload: Any) -> str:
    """The template with each placeholder replaced in one pass (values never re-scanned),
    cut at MAX_RENDERED characters."""
    rendered = PLACEHOLDER.sub(lambda m: _lookup(payload, m.group(1)), template)
    return rendered[:MAX_RENDERED]
