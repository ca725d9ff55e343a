"""`BURROW_SANDBOX_ALLOW_DOMAINS`: the host names a sandbox's egress may reach.

Entries are exact names (`registry.npmjs.org`) or wildcards (`*.github.com`: any name
under github.com, not github.com itself — list both when both are wanted). Matching is by
name, case-insensitive, with a trailing dot ignored; an address literal matches only when
it is listed as such.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SETTING = "BURROW_SANDBOX_ALLOW_DOMAINS"
LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
MAX_NAME = 253


def normalised(host: str) -> str:
    return host.strip().lower().rstrip(".")


def _valid_name(name: str) -> bool:
    return 0 < len(name) <= MAX_NAME and all(LABEL.fullmatch(part) for part in name.split("."))


@dataclass(frozen=True)
class DomainAllowlist:
    exact: frozenset[str] = frozenset()
    suffixes: frozenset[str] = frozenset()  # ".example.com" for "*.example.com"

    @classmethod
    def parse(cls, text: str) -> DomainAllowlist:
        """Comma-separated entries; a malformed one is a ValueError naming the setting."""
        exact: set[str] = set()
        suffixes: set[str] = set()
        for raw in text.split(","):
            entry = normalised(raw)
            if not entry:
                continue
            name = entry[2:] if entry.startswith("*.") else entry
            if not _valid_name(name):
                raise ValueError(
                    f"{SETTING}: {raw.strip()!r} is not a host name or a `*.domain` "
                    "wildcard; use e.g. `registry.npmjs.org,*.github.com`."
                )
            if entry.startswith("*."):
                suffixes.add("." + name)
            else:
                exact.add(name)
        return cls(frozenset(exact), frozenset(suffixes))

    def __bool__(self) -> bool:
        return bool(self.exact or self.suffixes)

    def allows(self, host: str) -> bool:
        name = normalised(host)
        if name in self.exact:
            return True
        return any(name.endswith(suffix) for suffix in self.suffixes)

    def narrowed(self, to: DomainAllowlist) -> DomainAllowlist:
        """The names both lists allow: a sandbox asking for `to` on a host with this one."""
        exact = {n for n in to.exact if self.allows(n)} | {n for n in self.exact if to.allows(n)}
        # Names under both suffixes end with the longer one, when one ends with the other.
        suffixes = {s for s in to.suffixes if any(s.endswith(h) for h in self.suffixes)}
        suffixes |= {h for h in self.suffixes if any(h.endswith(s) for s in to.suffixes)}
        return DomainAllowlist(frozenset(exact), frozenset(suffixes))

    def entries(self) -> list[str]:
        return sorted(self.exact) + sorted("*" + suffix for suffix in self.suffixes)
