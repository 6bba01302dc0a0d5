"""What ``sep_main --workers`` says of where its local Ray listens: the listening sockets of a
process read from /proc, and the start-up line (loopback only, or a warning naming each one)."""

from __future__ import annotations

import socket

import pytest

from center.scale.loopback import Listener, describe, ray_listeners


def test_the_listening_sockets_of_this_process_are_read_from_proc():
    with socket.socket() as ipv4, socket.socket() as quiet:
        ipv4.bind(("127.0.0.1", 0))
        ipv4.listen()
        quiet.bind(("127.0.0.1", 0))  # bound, not listening: not listed
        found = {(x.address, x.port) for x in ray_listeners() if x.program == "driver"}
        assert ("127.0.0.1", ipv4.getsockname()[1]) in found
        assert ("127.0.0.1", quiet.getsockname()[1]) not in found
        if socket.has_ipv6:
            try:
                ipv6 = socket.socket(socket.AF_INET6)
                ipv6.bind(("::1", 0))
            except OSError:
                pytest.skip("no IPv6 loopback here")
            with ipv6:
                ipv6.listen()
                listed = [x for x in ray_listeners() if x.port == ipv6.getsockname()[1]]
                assert [(x.address, x.loopback) for x in listed] == [("::1", True)]


def test_the_start_up_line_says_loopback_only_or_warns_with_each_listener():
    mapped = Listener("gcs_server", "::ffff:127.0.0.1", 33701, 7)
    agent = Listener("ray::RuntimeEnvAgent", "127.0.0.1", 34541, 8)
    assert mapped.loopback and agent.loopback
    assert describe([mapped, agent]) == (
        "local Ray listens on loopback only (gcs_server on [::ffff:127.0.0.1]:33701, "
        "ray::RuntimeEnvAgent on 127.0.0.1:34541)"
    )
    exposed = [mapped, Listener("raylet", "::", 38545, 9), Listener("x", "192.0.2.2", 1, 10)]
    line = describe(exposed)
    assert line.startswith("warning: the local Ray listens beyond loopback (")
    assert "raylet on [::]:38545" in line and "x on 192.0.2.2:1" in line
    assert describe([]).startswith("warning:")  # nothing found is no proof of loopback
