"""Draws the app icons in web/public (the logo: a burrow's mound and its door) as PNGs.

Run once after changing the logo: `python3 web/scripts/make_icons.py`. No image library:
a PNG is a few zlib-compressed rows. The logo sits inside the middle 80% (the safe zone
of a maskable icon), on the dark theme's background.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

BACKGROUND = (0x13, 0x14, 0x16)
MOUND = (0xD9, 0xA1, 0x5B)
PUBLIC = Path(__file__).resolve().parents[1] / "public"


def pixel(x: float, y: float) -> tuple[int, int, int]:
    """The colour at (x, y) in the logo's 16×16 grid: a half-disc of radius 7 on y = 14
    with a half-disc door of radius 2, shifted down to centre the drawing."""
    y += 2.5  # the drawing spans y 7..14: centre it on 8
    ground = 14 - y
    if ground < 0:
        return BACKGROUND
    distance = ((x - 8) ** 2 + ground**2) ** 0.5
    if distance <= 2:
        return BACKGROUND
    return MOUND if distance <= 7 else BACKGROUND


def png(size: int) -> bytes:
    scale = 16 / (size * 0.8)  # the 16-unit grid fills the middle 80%
    offset = size * 0.1
    rows = bytearray()
    samples = ((0.25, 0.25), (0.75, 0.25), (0.25, 0.75), (0.75, 0.75))  # 4× anti-aliasing
    for py in range(size):
        rows.append(0)  # no filter
        for px in range(size):
            colours = [
                pixel((px + dx - offset) * scale, (py + dy - offset) * scale) for dx, dy in samples
            ]
            rows += bytes(sum(c[i] for c in colours) // len(colours) for i in range(3))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + chunk(b"IEND", b"")
    )


if __name__ == "__main__":
    for size in (192, 512):
        (PUBLIC / f"icon-{size}.png").write_bytes(png(size))
