"""Masking secret values in output: whole texts, JSON-like event data, and streams cut at
every possible place."""

from __future__ import annotations

import random

from burrow.sandbox.masking import MASK, MaskedStream, SecretMask

SECRET = "s3cr3t-Tok3n-42"


def stream(mask: SecretMask, chunks: list[bytes]) -> list[bytes]:
    masked = MaskedStream(mask)
    out = [masked.feed(c) for c in chunks]
    out.append(masked.end())
    return out


def test_every_split_of_a_secret_is_masked() -> None:
    mask = SecretMask([SECRET])
    text = f"before {SECRET} middle {SECRET}after".encode()
    for cut in range(len(text) + 1):
        for cut2 in range(cut, len(text) + 1):
            out = stream(mask, [text[:cut], text[cut:cut2], text[cut2:]])
            assert b"".join(out) == f"before {MASK} middle {MASK}after".encode()
            assert not any(b"Tok3n" in piece for piece in out)


def test_byte_by_byte_shows_nothing_of_it_and_loses_nothing_else() -> None:
    mask = SecretMask([SECRET])
    text = f"x{SECRET}y\n".encode()
    out = stream(mask, [bytes([b]) for b in text])
    assert b"".join(out) == f"x{MASK}y\n".encode()
    # What is held back is only ever a prefix of the secret, released when it stops matching.
    assert b"".join(out[:1]) == b"x"


def test_random_chunks_with_several_and_nested_secrets() -> None:
    values = ["abcdefgh", "abcdefghijkl-long", "zzzz9999", "pass\nword-line2"]
    mask = SecretMask(values)
    rng = random.Random(7)
    alphabet = "abcdefghz9 \n-"
    for _ in range(300):
        parts = [rng.choice([*values, "".join(rng.choices(alphabet, k=rng.randint(0, 12)))])]
        parts += [rng.choice(values) for _ in range(rng.randint(0, 3))]
        rng.shuffle(parts)
        text = "|".join(parts).encode()
        cuts = sorted(rng.sample(range(len(text) + 1), k=min(len(text) + 1, rng.randint(0, 8))))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        out = b"".join(stream(mask, chunks))
        assert out == mask.raw(text)
        for value in values:
            assert value.encode() not in out


def test_terminal_line_ends_and_a_trailing_newline() -> None:
    mask = SecretMask(["-----BEGIN KEY-----\nAAAABBBB\n-----END KEY-----\n"])
    assert mask.text("x -----BEGIN KEY-----\r\nAAAABBBB\r\n-----END KEY----- y") == f"x {MASK} y"


def test_event_data_keys_and_nested_values() -> None:
    mask = SecretMask([SECRET])
    data = {"output": f"a {SECRET}", "arguments": {SECRET: [f"{SECRET}!", 3, None]}, "n": 1}
    assert mask.data(data) == {
        "output": f"a {MASK}",
        "arguments": {MASK: [f"{MASK}!", 3, None]},
        "n": 1,
    }


def test_no_secrets_passes_everything_at_once() -> None:
    masked = MaskedStream(SecretMask())
    assert masked.feed(b"abc") == b"abc"
    assert masked.end() == b""


def test_utf8_secret_split_inside_a_character() -> None:
    mask = SecretMask(["clé-secrète-✓"])
    text = "→ clé-secrète-✓ ←".encode()
    for cut in range(len(text) + 1):
        assert b"".join(stream(mask, [text[:cut], text[cut:]])) == f"→ {MASK} ←".encode()
