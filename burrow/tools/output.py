"""Command output for the model: the head and tail of it, the whole of it in a log file."""

from __future__ import annotations

# Past this the saved log keeps its start and says so (well under one write's 64 MiB).
MAX_LOG_CHARS = 10_000_000


class OutputBuffer:
    """Collects combined stdout+stderr in arrival order, bounded in memory."""

    def __init__(self, head: int, tail: int) -> None:
        self.head = head
        self.tail = tail
        self.total_chars = 0
        self._log: list[str] = []
        self._log_chars = 0
        self._tail_text = ""

    def add(self, text: str) -> None:
        self.total_chars += len(text)
        room = MAX_LOG_CHARS - self._log_chars
        if room > 0:
            kept = text[:room]
            self._log.append(kept)
            self._log_chars += len(kept)
        self._tail_text = (self._tail_text + text)[-self.tail :] if self.tail else ""

    @property
    def truncated(self) -> bool:
        return self.total_chars > self.head + self.tail

    @property
    def log_complete(self) -> bool:
        return self.total_chars <= MAX_LOG_CHARS

    def full_text(self) -> str:
        text = "".join(self._log)
        if not self.log_complete:
            text += f"\n[log stopped after {MAX_LOG_CHARS:,} of {self.total_chars:,} characters]\n"
        return text

    def for_model(self, log_path: str | None) -> str:
        """All the output if short; else head + a note on what was cut and where it is + tail."""
        full = "".join(self._log)
        if not self.truncated:
            return full
        omitted = self.total_chars - self.head - self.tail
        middle = full[self.head : self.total_chars - self.tail] if self.log_complete else ""
        lines = f" ({middle.count(chr(10)):,} lines)" if middle else ""
        where = (
            f"The full output is saved in {log_path}; read parts of it with read_file "
            "(offset/limit) or search it with grep."
            if log_path
            else "The full output could not be saved."
        )
        note = (
            f"\n\n[... {omitted:,} characters{lines} omitted from the middle of "
            f"{self.total_chars:,} characters of output. {where}]\n\n"
        )
        return full[: self.head] + note + self._tail_text
