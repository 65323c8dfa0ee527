"""dataService on --local: the dispatcher and data workers run as tasks on ports of their own,
the trainers and data workers are told the dispatcher's, and the run's end and failure rules
treat them as the servers they are (launcher/backends/local/policy.py, tasks.py)."""

from __future__ import annotations

import json
import signal
import sys

from launcher.backends.local.policy import TaskSnapshot, TaskState, decide, describe_exit
from launcher.backends.local.tasks import plan_tasks
from launcher.cluster_spec.loader import load_text
from launcher.plan import plan
from launcher.status.status import Phase
from worker import contract
from worker.contract import Role

MWMS = """\
name: m
strategy: multi_worker_mirrored
roles: {worker: {replicas: 2}}
checkpoint: {dir: "gs://bucket/m"}
dataService: {workers: 2}
"""
T0 = 1000.0


def task(name: str, state: str = "running", code: int | None = None) -> TaskSnapshot:
    role, index = name.rsplit("-", 1)
    ended_at = T0 if state in ("succeeded", "failed") else None
    reason = describe_exit(code) if code is not None else ""
    return TaskSnapshot(Role(role), int(index), TaskState(state), code, reason, ended_at)


def tasks(**states) -> list[TaskSnapshot]:
    names = ("worker-0", "worker-1", "dispatcher-0", "data-worker-0", "data-worker-1")
    return [states.get(n.replace("-", "_")) or task(n) for n in names]


def test_each_data_task_gets_its_own_port_and_everyone_the_dispatchers():
    held, planned = plan_tasks(plan.plan(load_text(MWMS)), sys.executable)
    try:
        by_name = {t.name: t for t in planned}
        dispatcher = json.loads(by_name["dispatcher-0"].env[contract.TF_CONFIG])
        address = dispatcher["cluster"]["dispatcher"][0]
        data_workers = dispatcher["cluster"]["data-worker"]
        trainers = json.loads(by_name["worker-0"].env[contract.TF_CONFIG])["cluster"]["worker"]
        assert len({address, *data_workers, *trainers}) == 5  # one port each, all held by the run
        assert {int(a.rsplit(":", 1)[1]) for a in (address, *data_workers, *trainers)} <= set(held.ports)
        for name in ("worker-0", "worker-1", "data-worker-0", "data-worker-1"):
            assert by_name[name].env[contract.DATA_SERVICE] == f"grpc://{address}", name
        assert contract.DATA_SERVICE not in by_name["dispatcher-0"].env
        own = json.loads(by_name["data-worker-1"].env[contract.TF_CONFIG])
        assert own["task"] == {"type": "data-worker", "index": 1} and own["cluster"]["data-worker"] == data_workers
    finally:
        held.close()


def test_the_chiefs_success_stops_the_data_roles_as_succeeded_and_waits_only_for_its_peers():
    cluster = plan.plan(load_text(MWMS))
    d = decide(cluster, tasks(worker_0=task("worker-0", "succeeded", 0)), now=T0 + 1, peer_exit_grace_seconds=60)
    assert d.phase is Phase.FINISHING and "worker-1" in d.message and "data-worker" not in d.message
    d = decide(
        cluster,
        tasks(worker_0=task("worker-0", "succeeded", 0), worker_1=task("worker-1", "succeeded", 0)),
        now=T0 + 1,
    )
    assert d.phase is Phase.SUCCEEDED
    never_exits = ("succeeded", "stopped after training (never exits)")
    assert {f"{s.role}-{s.index}": (s.state.value, s.reason) for s in d.stop} == {
        "dispatcher-0": never_exits,
        "data-worker-0": never_exits,
        "data-worker-1": never_exits,
    }


def test_a_data_worker_out_of_retries_fails_the_run_after_the_chiefs_grace():
    dead = task("data-worker-1", "failed", -signal.SIGKILL)
    cluster = plan.plan(load_text(MWMS))
    assert decide(cluster, tasks(data_worker_1=dead), now=T0 + 5, failure_grace_seconds=20).phase is Phase.RUNNING
    d = decide(cluster, tasks(data_worker_1=dead), now=T0 + 20, failure_grace_seconds=20)
    assert d.phase is Phase.FAILED and d.message == "data-worker-1 was killed by SIGKILL; worker-0 was stopped"
