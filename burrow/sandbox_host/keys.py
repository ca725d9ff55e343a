"""API keys of a sandbox host: who may create sandboxes, and whose sandbox is whose."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

KEYS_VARIABLE = "BURROW_SANDBOX_HOST_API_KEYS"
KEY_PREFIX = "e2b_"  # the format E2B's keys have; the SDK itself no longer checks it


@dataclass(frozen=True)
class ApiKeys:
    """The accepted keys. A key's owner id (a hash, never the key) tags its sandboxes."""

    keys: tuple[str, ...]

    @classmethod
    def from_environment(cls) -> tuple[ApiKeys, str | None]:
        """The keys in BURROW_SANDBOX_HOST_API_KEYS (comma-separated), or one generated key
        (returned second, to be printed once) when the variable is empty."""
        listed = tuple(k.strip() for k in os.environ.get(KEYS_VARIABLE, "").split(",") if k.strip())
        if listed:
            return cls(listed), None
        generated = generate_key()
        return cls((generated,)), generated

    def owner(self, presented: str | None) -> str | None:
        """The owner id of a presented key, None when it is not one of ours. Every key is
        compared in constant time, so timing tells nothing about how much of a key matched."""
        if not presented:
            return None
        found = None
        for key in self.keys:
            if hmac.compare_digest(key.encode(), presented.encode()):
                found = key
        return owner_id(found) if found is not None else None


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_hex(20)


def owner_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]
