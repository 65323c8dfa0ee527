"""Who holds a port (worker/lifecycle/port_holders.py), found in /proc for the line that says why
a task could not bind its own: real processes on real sockets."""

from __future__ import annotations

import socket
import subprocess
import sys

from local_clusters import free_port

from worker.lifecycle import port_holders

# Listens on a port of its own, connects to the port given, prints both ports, holds until stdin closes.
STRANGER = """
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print(server.getsockname()[1], client.getsockname()[1], flush=True)
sys.stdin.read()
"""


def test_a_listener_and_a_connections_local_port_are_named_with_their_process():
    with socket.create_server(("127.0.0.1", 0)) as target:
        stranger = subprocess.Popen(
            [sys.executable, "-c", STRANGER, str(target.getsockname()[1])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            listening, connected = map(int, stranger.stdout.readline().split())
            said_listening = port_holders.describe(listening)
            said_connected = port_holders.describe(connected)
        finally:
            stranger.communicate("")
    assert "\n" not in said_listening + said_connected  # the stranger's command has newlines
    assert said_listening.startswith(f"pid {stranger.pid} ({sys.executable} -c ") and said_listening.endswith(
        ") listens on it"
    ), said_listening
    assert said_connected.startswith(f"pid {stranger.pid} (") and said_connected.endswith(
        ") uses it as a connection's local port"
    ), said_connected


def test_a_free_port_is_said_to_be_free():
    assert port_holders.describe(free_port()).startswith("no listening or connected socket holds it now")
