from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from burrow.sandbox.backend import ErrorCode
from burrow.sandbox.guest import protocol


def test_error_codes_match_the_backend_enum() -> None:
    assert {code.value for code in ErrorCode} == protocol.ERROR_CODES


def test_frames_round_trip_binary_payloads_fed_byte_by_byte() -> None:
    payload = bytes(range(256)) * 4
    wire = protocol.encode_frame(protocol.STDOUT, payload) + protocol.encode_frame(
        protocol.EXIT, exit_code=0, signal=None
    )
    decoder = protocol.FrameDecoder()
    frames = [frame for byte in wire for frame in decoder.feed(bytes([byte]))]
    assert [frame.kind for frame in frames] == ["stdout", "exit"]
    assert frames[0].payload == payload
    assert frames[1].header["exit_code"] == 0
    assert decoder.pending == 0


def test_oversized_and_malformed_frames_are_refused() -> None:
    with pytest.raises(protocol.ProtocolError, match="too large"):
        protocol.FrameDecoder().feed(protocol.PREFIX.pack(protocol.MAX_HEADER_BYTES + 1, 0))
    bad_json = b"{nope"
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.FrameDecoder().feed(protocol.PREFIX.pack(len(bad_json), 0) + bad_json)
    unknown = b'{"kind":"launch_missiles"}'
    with pytest.raises(protocol.ProtocolError, match="no known kind"):
        protocol.FrameDecoder().feed(protocol.PREFIX.pack(len(unknown), 0) + unknown)
    with pytest.raises(protocol.ProtocolError):
        protocol.encode_frame("launch_missiles")


def test_hello_with_another_major_version_is_refused() -> None:
    ours = protocol.FrameDecoder().feed(protocol.hello_frame())[0]
    protocol.check_hello(ours)
    major, minor = protocol.PROTOCOL_VERSION
    newer_minor = protocol.Frame({"kind": "hello", "version": [major, minor + 1]})
    protocol.check_hello(newer_minor)
    other_major = protocol.Frame({"kind": "hello", "version": [major + 1, 0]})
    with pytest.raises(protocol.ProtocolError, match="not compatible"):
        protocol.check_hello(other_major)
    with pytest.raises(protocol.ProtocolError, match="expected a hello"):
        protocol.check_hello(protocol.Frame({"kind": "ping"}))


def test_the_hello_written_out_is_what_json_encodes_and_decodes_the_same() -> None:
    # Without json on the handshake path (the guest's start gates readiness), the hello is
    # written out by hand; it must stay the frame encode_frame would build.
    for version in (protocol.PROTOCOL_VERSION, (2, 0)):
        fields = {"version": list(version), "features": list(protocol.FEATURES)}
        assert protocol.hello_frame(version) == protocol.encode_frame(protocol.HELLO, **fields)
    [ours] = protocol.FrameDecoder().feed(protocol.hello_frame())
    assert ours.header == {"kind": "hello", **fields, "version": list(protocol.PROTOCOL_VERSION)}


def test_the_agent_starts_without_json_socket_os_or_runpy() -> None:
    # Each costs the sandbox's boot milliseconds; they load with the first request needing them.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import guest.server; "
        "costly = {'json', 're', 'enum', 'socket', 'runpy', 'typing', 'os'}; "
        "print(sorted(costly & set(sys.modules)))"
    )
    guest_parent = str(Path(protocol.__file__).parent.parent)
    out = subprocess.run(
        ["/usr/bin/python3", "-E", "-S", "-B", "-c", code, guest_parent],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
