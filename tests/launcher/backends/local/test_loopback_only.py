"""A local run's TensorFlow gRPC server answers on loopback only: through any other address of
this machine a connection meets the supervisor's guard, which resets it (issue 61). TF binds
`*:<port>` whatever TF_CONFIG says; ports.py has why the guard wins those connections."""

from __future__ import annotations

import socket
import subprocess

import pytest
from local_clusters import run_files, wait_until

from launcher.cluster_spec.spec import ClusterSpec

# The worker's gRPC server as the built-in worker's ps starts it (worker/roles/ps_server.py).
SERVE = """
import json, os, time
import tensorflow as tf
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id,
                              protocol="grpc", start=True)
print("serving at", json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"][0], flush=True)
time.sleep(600)
"""
HTTP2_PREFACE = b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n"


def other_addresses() -> list[str]:
    """This machine's addresses but loopback, as `hostname -I` lists them."""
    listed = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=True).stdout.split()
    return [a for a in listed if not a.startswith("127.") and a != "::1"]


def grpc_answer(host: str, port: int) -> bytes:
    """What the server at host:port sends after a client's HTTP/2 preface: a gRPC server sends its
    SETTINGS frame; b"" when the connection is closed or reset instead."""
    try:
        with socket.create_connection((host, port), timeout=10) as connection:
            connection.sendall(HTTP2_PREFACE)
            return connection.recv(64)
    except (ConnectionResetError, ConnectionRefusedError):
        return b""


@pytest.mark.skipif(not other_addresses(), reason="this machine has no address but loopback")
def test_tf_grpc_server_of_a_local_run_answers_on_loopback_only(backend):
    spec = ClusterSpec.model_validate(
        {
            "name": "closed",
            "strategy": "multi_worker_mirrored",
            "command": [backend.config.task_python, "-c", SERVE],
            "roles": {"worker": {"replicas": 1}},
        }
    )
    backend.submit(spec)
    try:
        files = run_files(backend, "closed")
        wait_until(lambda: "serving at" in files.log_path("worker", 0).read_text(), 120, "the TF server to start")
        address = files.log_path("worker", 0).read_text().split("serving at ", 1)[1].split()[0]
        port = int(address.rsplit(":", 1)[1])
        assert grpc_answer("127.0.0.1", port) != b"", "the task's own address must reach its server"
        for address in other_addresses():
            assert grpc_answer(address, port) == b"", f"TF's gRPC answered at {address}:{port}"
    finally:
        backend.delete("closed")
