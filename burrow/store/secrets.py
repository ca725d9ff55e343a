"""Secrets at rest: encrypted with a key from the environment or the data directory.

The key is `BURROW_SECRET_KEY` (a Fernet key) when set, else `secret.key` in the data
directory, created once with mode 0600. A database copied without that key reveals no
model keys.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.fernet import Fernet


class SecretUnreadable(Exception):
    """The stored secret cannot be decrypted: the key changed or the value was altered."""


class SecretBox:
    """Fernet (from `cryptography`, ~10 MB once loaded) is made on the first secret sealed
    or opened; the key is checked at once, as Fernet would."""

    def __init__(self, key: bytes) -> None:
        try:
            valid = len(base64.urlsafe_b64decode(key)) == 32
        except (binascii.Error, ValueError):
            valid = False
        if not valid:
            raise ValueError("Fernet key must be 32 url-safe base64-encoded bytes.")
        self._key = key

    @functools.cached_property
    def _fernet(self) -> Fernet:
        from cryptography.fernet import Fernet

        return Fernet(self._key)

    @classmethod
    def for_data_dir(cls, data_dir: Path, env_key: str | None = None) -> SecretBox:
        if env_key:
            return cls(env_key.encode())
        path = data_dir / "secret.key"
        try:
            return cls(path.read_bytes().strip())
        except FileNotFoundError:
            key = base64.urlsafe_b64encode(os.urandom(32))  # as Fernet.generate_key()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key)
            return cls(key)

    def seal(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode()

    def open(self, sealed: str) -> str:
        from cryptography.fernet import InvalidToken

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
    whatever the path, a known secret is not written to the journal or the log. In the log
    that includes tracebacks (an exception's message is in them) and the values of users'
    secrets, through `mask_log_with`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()
        self._log_masks: list[Callable[[str], str]] = []

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= 8:  # shorter values would mangle ordinary text
            self._secrets.add(secret)

    def mask_log_with(self, mask: Callable[[str], str]) -> None:
        """Also pass every log record's text through `mask` (not journal text: the journal
        masks each conversation's secrets itself)."""
        self._log_masks.append(mask)

    def apply(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def _apply_log(self, text: str) -> str:
        text = self.apply(text)
        for mask in self._log_masks:
            text = mask(text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._secrets and not self._log_masks:
            return True
        message = record.getMessage()
        cleaned = self._apply_log(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        # Formatters render a traceback once into `exc_text` and reuse it: render it
        # here, masked, so no handler prints the raw one.
        if record.exc_info and not record.exc_text:
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._apply_log(record.exc_text)
        if record.stack_info:
            record.stack_info = self._apply_log(record.stack_info)
        return True


_TRACEBACKS = logging.Formatter()


def install_redaction(redactor: Redactor) -> Callable[[], None]:
    """Attach `redactor` to every log handler (filters on handlers see propagated records,
    filters on loggers do not); returns the undo. That includes the handler of last resort:
    without a configured root handler (as under `burrow serve`), Burrow's own warnings and
    tracebacks reach stderr through it."""
    handlers: set[logging.Handler] = set(logging.root.handlers)
    if logging.lastResort is not None:
        handlers.add(logging.lastResort)
    for logger in logging.Logger.manager.loggerDict.values():
        if isinstance(logger, logging.Logger):
            handlers.update(logger.handlers)
    for handler in handlers:
        handler.addFilter(redactor)

    def uninstall() -> None:
        for handler in handlers:
            handler.removeFilter(redactor)

    return uninstall
