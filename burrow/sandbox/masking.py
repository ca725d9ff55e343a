"""Masking secret values in what leaves a sandbox: whole texts, and streams that arrive in
chunks.

A command can print a secret a byte at a time with pauses, so each chunk alone holds no
secret. `MaskedStream` therefore holds back the end of a chunk while it could still be the
start of a secret, and lets it go once the next chunk (or the end of the stream) decides.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from typing import Any

MASK = "****"
_MASK_BYTES = MASK.encode()


def _variants(value: str) -> set[str]:
    """The forms a value takes in output: as set, without surrounding blank space (a pasted
    key's final newline), and with a terminal's CR LF line ends."""
    found = {value, value.strip()}
    found |= {v.replace("\n", "\r\n") for v in found if "\n" in v}
    return {v for v in found if v}


@functools.lru_cache(maxsize=64)
def _patterns(forms: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[bytes]]:
    # Longest first: the alternation then finds the longest value at the leftmost place,
    # so a value inside another one never leaves the longer one's remainder behind.
    ordered = sorted(forms, key=len, reverse=True)
    return (
        re.compile("|".join(re.escape(f) for f in ordered)),
        re.compile(b"|".join(re.escape(f.encode()) for f in ordered)),
    )


class SecretMask:
    """The values to replace with `****`."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        forms = tuple(sorted({v for value in values for v in _variants(value)}))
        self.forms = forms  # what is replaced, in order: equal forms mask alike
        self._bytes = [f.encode() for f in forms]
        self._text: re.Pattern[str] | None = None
        self._raw: re.Pattern[bytes] | None = None
        if forms:
            self._text, self._raw = _patterns(forms)

    def __bool__(self) -> bool:
        return bool(self._bytes)

    def text(self, text: str) -> str:
        return self._text.sub(MASK, text) if self._text else text

    def data(self, value: Any) -> Any:
        """A JSON-like value with every string (keys too) masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    def raw(self, data: bytes) -> bytes:
        return self._raw.sub(_MASK_BYTES, data) if self._raw else data

    def matches(self, data: bytes) -> Iterator[re.Match[bytes]]:
        return self._raw.finditer(data) if self._raw else iter(())

    def pending_from(self, data: bytes, start: int) -> int:
        """The first place at or after `start` from which the rest of `data` could still
        grow into a value (it is a proper prefix of one); len(data) when none is."""
        first_place = len(data)
        for value in self._bytes:
            head = value[:1]
            i = max(start, len(data) - len(value) + 1)
            while i < first_place and (i := data.find(head, i, first_place)) != -1:
                if value.startswith(data[i:]):
                    first_place = i
                    break
                i += 1
        return first_place


class MaskedStream:
    """One output stream with secrets masked, also those split across chunks."""

    def __init__(self, mask: SecretMask) -> None:
        self.mask = mask
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """What of `data` (after what was held) may be shown now."""
        if not self.mask:
            data, self._held = self._held + data, b""
            return data
        buffer = self._held + data
        cut = self.mask.pending_from(buffer, 0)
        shown, done = [], 0
        for match in self.mask.matches(buffer):
            if match.start() >= cut:
                break  # it may yet be the start of a longer value
            shown += [buffer[done : match.start()], _MASK_BYTES]
            done = match.end()
            if done > cut:  # a whole value ran past the first possible start of another
                cut = self.mask.pending_from(buffer, done)
        shown.append(buffer[done:cut])
        self._held = buffer[cut:]
        return b"".join(shown)

    def end(self) -> bytes:
        """The held-back rest, masked: the stream ended, so nothing more can complete it."""
        rest, self._held = self._held, b""
        return self.mask.raw(rest)
