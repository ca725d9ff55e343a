"""Structured logs: every record logged while a run goes carries its conversation and run
ids (the same ids as its trace and its journal), as text or JSON lines (`BURROW_LOG_FORMAT`).

The ids travel in context variables set once for the run's task, so nothing below the
runtime passes them along: a retry logged by the model client or a checkpoint failure
logged by the sandbox pool is tagged all the same.

One record is one line: control characters in a message are escaped (`ControlEscapes`), on
Burrow's handler and uvicorn's, since logged values come from sandboxes, workspaces
(`.burrow/services.json`) and requests, and a CR/LF in one would forge whole log lines; a
traceback's lines follow indented.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import IO, Literal

CONVERSATION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "burrow_conversation_id", default=None
)
RUN: contextvars.ContextVar[str | None] = contextvars.ContextVar("burrow_run_id", default=None)
TEXT = "%(asctime)s %(levelname)s %(name)s [%(conversation_id)s %(run_id)s] %(message)s"


def run_context(cid: str, run_id: str) -> contextvars.Context:
    """A copy of the current context with the run's ids set: the context of its task."""
    context = contextvars.copy_context()
    context.run(CONVERSATION.set, cid)
    context.run(RUN.set, run_id)
    return context


class RunIds(logging.Filter):
    """Tags each record with the ids of the run it was logged in ("-" outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "conversation_id"):
            record.conversation_id = CONVERSATION.get() or "-"
        if not hasattr(record, "run_id"):
            record.run_id = RUN.get() or "-"
        return True


# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str) -> str:
    """`text` with its control characters as escapes (`\\n`, `\\x1b`, `\\u2028`)."""
    return _CONTROL.sub(lambda m: _NAMED.get(m[0]) or repr(m[0])[1:-1], text)


class ControlEscapes(logging.Filter):
    """Escapes the control characters of a record's message; indents its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit: the handler reports that itself
            return True
        if _CONTROL.search(message):
            record.msg, record.args = escape_controls(message), None
        if record.exc_info and not record.exc_text:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = "\n".join("  | " + line for line in text.splitlines())
        return True


_ESCAPES = ControlEscapes()  # one instance: adding it to a handler twice is a no-op


def escape_uvicorn_records() -> None:
    """Put `ControlEscapes` on uvicorn's handlers (made anew with each `uvicorn.Config`)."""
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            handler.addFilter(_ESCAPES)


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "conversation_id": getattr(record, "conversation_id", "-"),
            "run_id": getattr(record, "run_id", "-"),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(
    style: Literal["text", "json"], level: str = "WARNING", stream: IO[str] | None = None
) -> logging.Handler:
    """One handler on the `burrow` logger (replacing one this function added before).
    Installed before the services open, so their log redaction covers it."""
    logger = logging.getLogger("burrow")
    for old in [h for h in logger.handlers if getattr(h, "burrow_logs", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.burrow_logs = True  # type: ignore[attr-defined]
    handler.addFilter(RunIds())
    handler.addFilter(_ESCAPES)
    handler.setFormatter(JsonLines() if style == "json" else logging.Formatter(TEXT))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False  # not twice through the root's last-resort handler
    return handler
