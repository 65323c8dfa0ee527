"""The tf.data service (dataService) as roles of real local clusters: the trainers' input
pipelines run on the data workers (the paced probe program's per-batch sleep runs there), the
dispatcher and a data worker killed mid-training are replaced while training goes on, and every
data role is ended once the chief has succeeded."""

from __future__ import annotations

import time

import pytest
from local_clusters import (
    Submission,
    assert_no_task_processes,
    attempts,
    events,
    final_marker,
    kill_task,
    make_spec,
    measure,
    run_files,
    wait_until,
    worker_args,
)

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("probe_programs_importable")]

TIMEOUT = 420
DATA_SERVICE = {"workers": 2}


def data_service_spec(name: str, strategy: str, steps: int, every: int, step_seconds: float, **fields):
    """The paced probe program read through the cluster's data service: its per-batch sleep
    runs on the data workers, so the two of them set the pace together."""
    args = [*worker_args(steps, every), "--data-service"]
    return make_spec(
        name,
        strategy,
        args,
        evaluator=False,
        program={"module": "paced_program", "args": args},
        env={"PACED_STEP_SECONDS": str(step_seconds)},
        dataService=DATA_SERVICE,
        **fields,
    )


def serving(backend, name: str, role: str, index: int) -> list[dict]:
    """The `serving` record of each attempt of one data role's task that got that far."""
    return [r for attempt in attempts(backend, name, role, index) for r in attempt if r["event"] == "serving"]


def trained_step(backend, name: str) -> int:
    blocks = events(backend, name, "chief", 0, "block")
    return blocks[-1]["step"] if blocks else 0


def journaled_jobs(backend, name: str) -> set[str]:
    """The named jobs in the dispatcher's journal (<model dir>/data-service): one per input
    pipeline that read through it (worker/roles/data_service.py distribute)."""
    journal = run_files(backend, name).dir / "model" / "data-service" / "tf_data_dispatcher_journal"
    records = b"".join(path.read_bytes() for path in journal.iterdir())
    return {job for job in ("train-0", "train-1", "train-2") if job.encode() in records}


def assert_data_roles_ended_with_the_chief(backend, name: str, workdir) -> None:
    assert_no_task_processes(workdir)
    roles = {r.role: r for r in backend.status(name).roles}
    assert roles["dispatcher"].succeeded == 1 and roles["data-worker"].succeeded == 2, roles
    assert roles["dispatcher"].active == 0 and roles["data-worker"].active == 0


def test_ps_training_goes_on_through_a_lost_dispatcher_and_then_a_lost_data_worker(backend, workdir):
    name = "data-ps"
    steps = 1200
    spec = data_service_spec(name, "parameter_server", steps, 50, 0.05, backoffLimit=2)
    run = Submission(backend, spec)
    wait_until(lambda: run.still_running() and trained_step(backend, name) >= 50, TIMEOUT, "chief past step 50")
    step_at_first_kill = trained_step(backend, name)
    kill_task(backend, name, "dispatcher", 0)
    killed_at = time.time()
    wait_until(
        lambda: run.still_running() and len(serving(backend, name, "dispatcher", 0)) == 2,
        TIMEOUT,
        "the dispatcher serving again",
    )
    dispatcher_back = time.time()
    step_at_second_kill = trained_step(backend, name)
    kill_task(backend, name, "data-worker", 1)
    wait_until(
        lambda: run.still_running() and len(serving(backend, name, "data-worker", 1)) == 2,
        TIMEOUT,
        "data-worker-1 serving again",
    )
    worker_back = time.time()
    step_with_worker_back = trained_step(backend, name)
    assert run.wait(TIMEOUT) == 0, backend.status(name)
    assert final_marker(backend, name)["step"] == steps
    # the restarted dispatcher found the datasets and jobs of its first attempt in its journal
    first, second = serving(backend, name, "dispatcher", 0)
    assert first["resumed_datasets"] == 0 and second["resumed_datasets"] >= 1, (first, second)
    assert journaled_jobs(backend, name) == {"train-0"}  # the PS workers share one job: a batch goes to one
    # training went on while the dispatcher was down (6-11 s here: blocks of 50 steps are 2 s);
    # a data worker is back too soon to say so at this grain: its steps are measured
    assert step_at_second_kill > step_at_first_kill
    roles = {r.role: r for r in backend.status(name).roles}
    assert roles["dispatcher"].failed == 1 and roles["data-worker"].failed == 1, roles
    assert roles["chief"].failed == 0 and roles["worker"].failed == 0, roles
    assert_data_roles_ended_with_the_chief(backend, name, workdir)
    measure(
        f"data service (PS, 2 data workers): SIGKILL dispatcher at step {step_at_first_kill}: serving again "
        f"{dispatcher_back - killed_at:.1f} s later, the chief at step {step_at_second_kill} by then; SIGKILL "
        f"data-worker-1 at step {step_at_second_kill}: serving "
        f"again {worker_back - dispatcher_back:.1f} s later at step {step_with_worker_back}; {steps} steps in "
        f"{run.seconds:.1f} s"
    )


def test_mwms_training_reads_through_the_data_service_to_the_end(backend, workdir):
    name = "data-mwms"
    spec = data_service_spec(name, "multi_worker_mirrored", 200, 100, 0.02)
    run = Submission(backend, spec)
    assert run.wait(TIMEOUT) == 0, backend.status(name)
    assert final_marker(backend, name)["step"] == 200
    assert journaled_jobs(backend, name) == {"train-0", "train-1"}  # each worker reads its own shard's job
    assert_data_roles_ended_with_the_chief(backend, name, workdir)
