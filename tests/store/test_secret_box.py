"""The secret box: a key is checked when the box is made, before Fernet is loaded; a key
made for the data directory is a Fernet key, kept 0600."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from burrow.store.secrets import SecretBox, SecretUnreadable


@pytest.mark.parametrize(
    "key",
    [b"", b"not a key", base64.urlsafe_b64encode(b"k" * 31), base64.urlsafe_b64encode(b"k" * 33)],
)
def test_a_key_fernet_refuses_is_refused_when_the_box_is_made(key: bytes) -> None:
    with pytest.raises(ValueError, match="32 url-safe base64-encoded bytes"):
        Fernet(key)
    with pytest.raises(ValueError, match="32 url-safe base64-encoded bytes"):
        SecretBox(key)


def test_the_data_directory_key_is_a_fernet_key_made_once(tmp_path: Path) -> None:
    box = SecretBox.for_data_dir(tmp_path)
    key = (tmp_path / "secret.key").read_bytes()
    assert stat.S_IMODE((tmp_path / "secret.key").stat().st_mode) == 0o600
    assert Fernet(key).decrypt(box.seal("value").encode()) == b"value"
    assert SecretBox.for_data_dir(tmp_path).open(box.seal("again")) == "again"
    with pytest.raises(SecretUnreadable):
        SecretBox(Fernet.generate_key()).open(box.seal("value"))
