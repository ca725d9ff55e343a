"""Secrets in the server's own log (issue 13, item 5): a model key or a user's secret inside
an exception's message is masked in the logged traceback too, on every handler, including
the one of last resort that prints Burrow's own records under `burrow serve`."""

from __future__ import annotations

import contextlib
import io
import logging
import uuid
from collections.abc import Iterator

import pytest
from cryptography.fernet import Fernet

from burrow.runs.conversations.secrets import ConversationSecrets
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.secrets import REDACTED, Redactor, SecretBox, install_redaction
from burrow.store.user_secrets import UserSecretStore

MODEL_KEY = "sk-model-key-0123456789abcdef"
USER_SECRET = "user-secret-value-9876543210"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """A handler on the root logger, as a deployment's logging config would add."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.root.addHandler(handler)
    yield stream
    logging.root.removeHandler(handler)


async def test_tracebacks_in_the_log_mask_model_keys_and_users_secrets(
    engine: Database, captured: io.StringIO
) -> None:
    secrets = ConversationSecrets(UserSecretStore(engine, SecretBox(Fernet.generate_key())))
    alice = await AccountStore(engine).get_or_create("alice")
    conversation = await ConversationStore(engine).create(alice.id, "a")
    await secrets.put(alice.id, "TOKEN", USER_SECRET)
    await secrets.mask_for(conversation.id)  # the conversation's commands got its secrets
    redactor = Redactor()
    redactor.add(MODEL_KEY)
    redactor.mask_log_with(secrets.mask_everywhere)
    uninstall = install_redaction(redactor)
    stderr = io.StringIO()  # where the handler of last resort writes
    try:
        with contextlib.redirect_stderr(stderr):
            for logger in (_enabled(logging.getLogger("burrow.test")), _without_handlers()):
                try:
                    raise RuntimeError(f"upstream said: bad key {MODEL_KEY} for {USER_SECRET}")
                except RuntimeError:
                    logger.exception("run failed with %s", USER_SECRET)
    finally:
        uninstall()

    shown, last_resort = captured.getvalue(), stderr.getvalue()
    for text in (shown, last_resort):
        assert "Traceback (most recent call last)" in text and "RuntimeError" in text
        assert MODEL_KEY not in text and USER_SECRET not in text
        assert f"bad key {REDACTED} for ****" in text
        assert "run failed with ****" in text


def _without_handlers() -> logging.Logger:
    """A logger whose records reach no configured handler: the last resort prints them."""
    logger = _enabled(logging.getLogger(f"burrow.test.unhandled.{uuid.uuid4().hex}"))
    logger.propagate = False
    return logger


def _enabled(logger: logging.Logger) -> logging.Logger:
    # Migrations' logging set-up (fileConfig) disables the loggers that existed before it.
    logger.disabled = False
    return logger
