"""Secrets at rest: encrypted with a key from the environment or the data directory.

The key is `BURROW_SECRET_KEY` (a Fernet key) when set, else `secret.key` in the data
directory, created once with mode 0600. A database copied without that key reveals no
model keys.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken


class SecretUnreadable(Exception):
    """The stored secret cannot be decrypted: the key changed or the value was altered."""


class SecretBox:
    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)

    @classmethod
    def for_data_dir(cls, data_dir: Path, env_key: str | None = None) -> SecretBox:
        if env_key:
            return cls(env_key.encode())
        path = data_dir / "secret.key"
        try:
            return cls(path.read_bytes().strip())
        except FileNotFoundError:
            key = Fernet.generate_key()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key)
            return cls(key)

    def seal(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode()

    def open(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken as exc:
            raise SecretUnreadable(
                "A stored secret cannot be decrypted with this secret key "
                "(BURROW_SECRET_KEY or secret.key in the data directory changed): set it again."
            ) from exc


def mask(secret: str) -> str:
    """What may be shown of a secret: its last four characters at most."""
    return f"…{secret[-4:]}" if len(secret) >= 12 else "…"


REDACTED = "[redacted]"


class Redactor(logging.Filter):
    """Replaces known secrets (model keys) in journal text and log records.

    A model can echo back anything it was sent, and an error message can quote a header;
    whatever the path, a known secret is not written to the journal or the log.
    """

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= 8:  # shorter values would mangle ordinary text
            self._secrets.add(secret)

    def apply(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secrets:
            message = record.getMessage()
            cleaned = self.apply(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


def install_redaction(redactor: Redactor) -> Callable[[], None]:
    """Attach `redactor` to every log handler (filters on handlers see propagated records,
    filters on loggers do not); returns the undo."""
    handlers = set(logging.root.handlers)
    for logger in logging.Logger.manager.loggerDict.values():
        if isinstance(logger, logging.Logger):
            handlers.update(logger.handlers)
    for handler in handlers:
        handler.addFilter(redactor)

    def uninstall() -> None:
        for handler in handlers:
            handler.removeFilter(redactor)

    return uninstall
