"""A task whose gRPC port another program holds: TensorFlow's server cannot start, and the task's
one line names the port and that program (worker/lifecycle/port_holders.py). One real ps task."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from local_clusters import REPO_ROOT, free_port

from worker import contract, errors

pytestmark = pytest.mark.process

# Another program's server on the port given (a plain listener), until stdin closes.
STRANGER = """
import socket, sys
server = socket.create_server(("0.0.0.0", int(sys.argv[1])))
print("up", flush=True)
sys.stdin.read()
"""


def test_a_ps_whose_port_is_taken_names_the_port_and_its_holder(backend, tmp_path):
    """`backend`: for the interpreter of the local tasks (TensorFlow's)."""
    port = free_port()
    cluster = {
        "chief": [f"127.0.0.1:{free_port()}"],
        "worker": [f"127.0.0.1:{free_port()}"],
        "ps": [f"127.0.0.1:{port}"],
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TFK8S_", "TF_CONFIG"))}
    env.update(
        {
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "ps", "index": 0}}),
            contract.STRATEGY: "parameter_server",
            contract.MODEL_DIR: str(tmp_path / "model"),
            "PYTHONPATH": str(REPO_ROOT),
        }
    )
    stranger = subprocess.Popen(
        [sys.executable, "-c", STRANGER, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert stranger.stdout.readline().strip() == "up"
        done = subprocess.run(
            [backend.config.task_python, "-m", "worker"],
            env=env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        stranger.communicate("")
    assert done.returncode == errors.EXIT_UNEXPECTED, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"tfk8s ps-0: error: cannot serve gRPC on this task's port {port} from TF_CONFIG: "), last
    assert f"pid {stranger.pid} ({sys.executable} -c " in last and ") listens on it; end that process" in last, last
