"""After SIGTERM a ps serves while the chief answers. A chief being deleted leaves its headless
Service's DNS while it still saves, so the ps also tries the chief's last resolved address
(worker/ps_server.LastKnownAddress). Real sockets; no TensorFlow process needed."""

from __future__ import annotations

import socket

import pytest

ps_server = pytest.importorskip("worker.roles.ps_server")


def listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


def test_a_name_that_stopped_resolving_is_tried_at_its_last_known_address():
    server = listener()
    port = server.getsockname()[1]
    chief = ps_server.LastKnownAddress(f"localhost:{port}")
    chief.refresh()
    assert f"127.0.0.1:{port}" in chief.known
    assert chief.answers()
    # The pod left DNS (terminating, not ready): its name no longer resolves
    gone = ps_server.LastKnownAddress(f"chief-0.tfk8s-test.invalid:{port}")
    gone.known = list(chief.known)
    gone.refresh()  # a failed lookup keeps what was known
    assert gone.known == chief.known
    assert gone.answers()  # still saving at its old address
    server.close()
    assert not gone.answers()  # now it is really gone


def test_no_chief_no_linger():
    assert not ps_server.LastKnownAddress(None).answers()
