"""The ports of local runs (launcher/backends/local/ports.py): each run holds its own from
planning to its end, so neither another run nor any other process takes one in the seconds a
task needs before it binds (importing TensorFlow). Plain-Python stand-in tasks, real sockets."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

from local_clusters import LocalBackend, LocalProcessBackendConfig, make_spec, run_files, wait_until

from launcher.backends.local.tasks import plan_tasks
from launcher.plan.plan import plan as make_plan
from worker import contract

# A task that says its TF_CONFIG port, waits for the test's go (TensorFlow's import, as it
# were), then binds and listens on it as TF's gRPC server does in a local run (all addresses,
# SO_REUSEADDR, and SO_REUSEPORT from the run's TF_GRPC_REUSE_PORT=true).
STAND_IN = """
import json, os, pathlib, socket, sys, time
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
port = int(config["cluster"][task["type"]][task["index"]].rsplit(":", 1)[1])
print(f"port {port}", flush=True)
go = pathlib.Path(os.environ["TFK8S_MODEL_DIR"]) / "go"
while not go.exists():
    time.sleep(0.05)
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, os.environ["TF_GRPC_REUSE_PORT"] == "true")
try:
    server.bind(("0.0.0.0", port))
    server.listen()
except OSError as exc:
    print(f"cannot serve on {port}: {exc}", flush=True)
    sys.exit(1)
print(f"serving on {port}", flush=True)
if task["type"] != "chief":
    time.sleep(600)
"""

# Another program on the machine that starts a server on each port given: a plain bind, as most
# programs do. Prints {port: "bound" or the error}, then holds what it got until stdin closes.
STRANGER = """
import json, socket, sys
results, held = {}, []
for port in map(int, sys.argv[1:]):
    sock = socket.socket()
    try:
        sock.bind(("0.0.0.0", port))
        sock.listen()
        held.append(sock)
        results[port] = "bound"
    except OSError as exc:
        results[port] = exc.strerror
print(json.dumps(results), flush=True)
sys.stdin.read()
"""

ROLES = {"chief": 1, "worker": 1, "ps": 1}


def stand_in_spec(name: str):
    spec = make_spec(name, "parameter_server", [], evaluator=False, roles=ROLES, backoffLimit=0, image="x/byo:1")
    data = spec.model_dump(by_alias=True)
    data.pop("program")
    data["command"] = [sys.executable, "-c", STAND_IN]
    return type(spec).model_validate(data)


def planned_ports(backend: LocalBackend, name: str) -> list[int]:
    """The gRPC ports the run's tasks said, once every task has said its own."""
    files = run_files(backend, name)

    def said() -> list[int] | None:
        ports = []
        for role in ROLES:
            log = files.log_path(role, 0)
            found = re.findall(r"^port (\d+)$", log.read_text(), re.M) if log.exists() else []
            if not found:
                return None
            ports.append(int(found[0]))
        return ports

    wait_until(lambda: said() is not None, 60, f"every task of {name} to say its port")
    return said()


def go(backend: LocalBackend, spec) -> None:
    """The stand-ins bind their ports now."""
    (Path(run_files(backend, spec.name).model_dir(spec)) / "go").touch()


def try_to_take(ports: list[int]) -> tuple[subprocess.Popen, dict[int, str]]:
    stranger = subprocess.Popen(
        [sys.executable, "-c", STRANGER, *map(str, ports)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    return stranger, {int(port): result for port, result in json.loads(stranger.stdout.readline()).items()}


def test_a_planned_port_is_not_taken_by_another_program_before_its_task_binds_it(backend, workdir):
    spec = stand_in_spec("held")
    backend.submit(spec)
    try:
        ports = planned_ports(backend, "held")
        stranger, taken = try_to_take(ports)
        try:
            assert taken == {port: "Address already in use" for port in ports}
            go(backend, spec)
            assert backend.wait("held") == 0, backend.status("held")
        finally:
            stranger.communicate("")
        for role in ROLES:
            assert "serving on" in run_files(backend, "held").log_path(role, 0).read_text()
        stranger, taken = try_to_take(ports)  # the ended run holds nothing any more
        stranger.communicate("")
        assert set(taken.values()) == {"bound"}, taken
    finally:
        backend.delete("held")  # no task left waiting when an assertion failed


def test_local_runs_submitted_at_once_get_ports_of_their_own(workdir):
    """Three detached runs planned at the same moment: no port shared, every one held."""
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir, foreground=False))
    specs = [stand_in_spec(f"side-{i}") for i in range(3)]
    submits = [threading.Thread(target=backend.submit, args=(spec,)) for spec in specs]
    for submit in submits:
        submit.start()
    for submit in submits:
        submit.join(60)
    try:
        ports = [port for spec in specs for port in planned_ports(backend, spec.name)]
        assert len(set(ports)) == len(ports) == 3 * len(ROLES), ports
        stranger, taken = try_to_take(ports)
        try:
            assert set(taken.values()) == {"Address already in use"}, taken
            for spec in specs:
                go(backend, spec)
            for spec in specs:
                assert backend.wait(spec.name) == 0, backend.status(spec.name)
        finally:
            stranger.communicate("")
    finally:
        for spec in specs:
            backend.delete(spec.name)  # no supervisor left waiting when an assertion failed


def test_the_built_in_workers_metrics_ports_are_held_too():
    spec = make_spec("metrics", "parameter_server", [], evaluator=True)
    held, tasks = plan_tasks(make_plan(spec, model_dir="/tmp/model"), sys.executable)
    try:
        metrics_ports = [int(t.env[contract.METRICS_PORT]) for t in tasks]
        grpc_ports = [
            int(json.loads(t.env[contract.TF_CONFIG])["cluster"][t.role.value][t.index].rsplit(":", 1)[1])
            for t in tasks
            if t.role.value != "evaluator"
        ]
        assert sorted(held.ports) == sorted(metrics_ports + grpc_ports)
        stranger, taken = try_to_take(held.ports)
        stranger.communicate("")
        assert set(taken.values()) == {"Address already in use"}, taken
    finally:
        held.close()
    stranger, taken = try_to_take(held.ports)  # closed: free for anyone again
    stranger.communicate("")
    assert set(taken.values()) == {"bound"}, taken
