"""`python -m worker` before TensorFlow: arguments, environment, peers (plain processes, fast)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from local_clusters import REPO_ROOT

from worker import context, errors
from worker.lifecycle import peers


def run_worker(args, env_overrides, timeout=60):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TFK8S_", "TF_CONFIG"))}
    env.update(env_overrides)
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "worker", *args], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_help_documents_every_program_argument():
    done = run_worker(["--help"], {})
    assert done.returncode == 0
    for flag in (
        "--loop",
        "--steps",
        "--global-batch-size",
        "--checkpoint-every",
        "--data",
        "--max-checkpoints",
        "--learning-rate",
        "TFK8S_PEER_TIMEOUT",
        "exit codes",
    ):
        assert flag in done.stdout


def test_missing_environment_is_one_clear_error():
    done = run_worker([], {})
    assert done.returncode == errors.EXIT_CONFIG
    assert "TFK8S_STRATEGY" in done.stderr and "TF_CONFIG is not set" in done.stderr
    assert "Traceback" not in done.stderr


def test_chief_names_every_unreachable_peer_after_the_timeout():
    cluster = {
        "chief": [f"127.0.0.1:{closed_port()}"],
        "worker": [f"127.0.0.1:{closed_port()}", "no-such-host.invalid:2222"],
        "ps": [f"127.0.0.1:{closed_port()}"],
    }
    started = time.monotonic()
    done = run_worker(
        [],
        {
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}}),
            "TFK8S_STRATEGY": "parameter_server",
            "TFK8S_MODEL_DIR": "/tmp/unused",
            "TFK8S_PEER_TIMEOUT": "2",
        },
    )
    assert done.returncode == errors.EXIT_PEERS_UNREACHABLE, done.stderr
    assert time.monotonic() - started < 20  # no TensorFlow import before the wait
    message = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(message) == 1, done.stderr
    assert "3 of 3 peers unreachable after 2 s" in message[0]
    assert "worker-0 at 127.0.0.1" in message[0] and "connection refused" in message[0]
    assert "worker-1 at no-such-host.invalid:2222: DNS name" in message[0]
    assert "ps-0 at 127.0.0.1" in message[0]


def test_who_waits_for_whom():
    cluster = {"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "ps": ["p:1"]}

    def task(strategy, role, index):
        return context.TaskContext(
            strategy=strategy,
            role=role,
            index=index,
            cluster=cluster,
            model_dir="/m",
            program_module="x",
            peer_timeout_seconds=1,
        )

    names = lambda t: [p.name for p in peers.peers_needed(t)]  # noqa: E731
    assert names(task("parameter_server", "chief", 0)) == ["worker-0", "worker-1", "ps-0"]
    assert names(task("parameter_server", "worker", 1)) == []
    assert names(task("parameter_server", "ps", 0)) == []
    assert names(task("parameter_server", "evaluator", 0)) == []
    assert names(task("multi_worker_mirrored", "worker", 1)) == ["worker-0"]


def test_mwms_workers_find_each_other_before_any_server_runs():
    """Each MWMS worker holds its own port while it waits, so neither waits forever."""
    addresses = [f"127.0.0.1:{closed_port()}", f"127.0.0.1:{closed_port()}"]
    results = {}

    def worker(index):
        other = peers.Peer(f"worker-{1 - index}", addresses[1 - index])
        with peers.hold_own_port(addresses[index]):
            results[index] = peers.wait_for_peers([other], 20, log=lambda _: None)

    threads = [threading.Thread(target=worker, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
        time.sleep(1.5)  # the second worker starts late, as pods do
    for thread in threads:
        thread.join(30)
    assert sorted(results) == [0, 1]
    # The port is free again for TensorFlow's server.
    for address in addresses:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("", peers.split_address(address)[1]))


@pytest.mark.parametrize(
    "tf_config, problem",
    [
        ("{not json", "not valid JSON"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}', "worker-3 is not in the cluster"),
        ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0}}', "does not run under"),
    ],
)
def test_tf_config_problems(tf_config, problem):
    with pytest.raises(errors.ConfigError, match=problem):
        context.from_environment(
            {"TF_CONFIG": tf_config, "TFK8S_STRATEGY": "multi_worker_mirrored", "TFK8S_MODEL_DIR": "/m"}
        )
