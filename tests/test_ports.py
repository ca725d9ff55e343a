"""burrow.ports: the ports handed to child servers before they bind."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from burrow.ports import free_port


def test_ports_are_never_handed_out_twice_and_stay_out_of_the_ephemeral_range() -> None:
    # One CI run gave a server the same port for its API and its preview listener (two
    # kernel-chosen ports in a row). Hand out far more than a test run needs.
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(2_000)]
    assert len(set(ports)) == len(ports)
    assert all(1024 < port < low for port in ports)


def test_a_port_something_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy, socket.socket() as spare:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        spare.bind(("127.0.0.1", 0))
        busy_port, spare_port = busy.getsockname()[1], spare.getsockname()[1]
        spare.close()  # free again: the second draw
        draws = iter([busy_port, spare_port])
        monkeypatch.setattr("burrow.ports.random.randint", lambda low, high: next(draws))
        assert free_port() == spare_port


def test_without_room_below_the_ephemeral_range_the_kernel_chooses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("burrow.ports._ephemeral_low", lambda: 1024)
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    for port in ports:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))
