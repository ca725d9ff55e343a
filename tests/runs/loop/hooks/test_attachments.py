"""Attachment paths and image sniffing (runs/loop/hooks/attachments.py)."""

from __future__ import annotations

import pytest

from burrow.runs.loop.hooks.attachments import BadPath, image_type, upload_name, workspace_path


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("a.png", "a.png"),
        ("./docs//a.png", "docs/a.png"),
        ("/workspace/docs/a.png", "docs/a.png"),
        (".burrow/attachments/x.png", ".burrow/attachments/x.png"),
    ],
)
def test_workspace_paths_are_normalised(given: str, stored: str) -> None:
    assert workspace_path(given) == stored


@pytest.mark.parametrize(
    "bad",
    ["", "..", "../a", "a/../../b", "a/..", "/etc/passwd", "/workspace2/a", "/workspace", "a\0b"],
)
def test_paths_that_leave_or_name_the_workspace_are_refused(bad: str) -> None:
    with pytest.raises(BadPath):
        workspace_path(bad)


def test_images_are_known_by_their_bytes_not_their_names() -> None:
    assert image_type(b"\x89PNG\r\n\x1a\n\0\0") == "image/png"
    assert image_type(b"\xff\xd8\xff\xe0") == "image/jpeg"
    assert image_type(b"GIF89a") == "image/gif"
    assert image_type(b"RIFF\0\0\0\0WEBPVP8 ") == "image/webp"
    assert image_type(b"RIFF\0\0\0\0WAVEfmt ") is None
    assert image_type(b"<svg xmlns='http://www.w3.org/2000/svg'>") is None
    assert image_type(b"<html><script>") is None


def test_upload_names_keep_only_a_safe_last_part() -> None:
    name = upload_name("../../etc/cron.d/evil job.sh")
    prefix, _, rest = name.partition("-")
    assert len(prefix) == 8 and rest == "evil_job.sh"
    assert upload_name("..\\..\\win.ini").endswith("-win.ini")
    assert upload_name("...").endswith("-file")  # nothing left: a neutral name, not a dotfile
    assert upload_name(".bashrc").endswith("-bashrc")
