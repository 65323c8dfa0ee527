"""The tf.data service (dataService) as roles of real local clusters: the trainers' input
pipelines run on the data workers (the paced probe program's per-batch sleep runs there), the
dispatcher and a data worker killed mid-training are replaced while training goes on, and every
data role is ended once the chief has succeeded."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from local_clusters import (
    REPO_ROOT,
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
PROBES = Path(__file__).parent / "probes"


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


def journaled_jobs(backend, name: str) -> dict[str, set[str]]:
    """The named jobs in the dispatcher's journal (<model dir>/data-service), by input pipeline:
    `train-<pipeline>-<fingerprint of its graph>` (worker/roles/data_service.py job_name)."""
    journal = run_files(backend, name).dir / "model" / "data-service" / "tf_data_dispatcher_journal"
    records = b"".join(path.read_bytes() for path in journal.iterdir())
    jobs: dict[str, set[str]] = {}
    for pipeline, fingerprint in re.findall(rb"train-(\d+)-(\d+)", records):
        jobs.setdefault(f"train-{pipeline.decode()}", set()).add(fingerprint.decode())
    return jobs


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
    jobs = journaled_jobs(backend, name)  # the PS workers share one job: a batch goes to one
    assert list(jobs) == ["train-0"] and len(jobs["train-0"]) == 1, jobs
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
    jobs = journaled_jobs(backend, name)  # each worker reads its own shard's job, one graph each
    assert sorted(jobs) == ["train-0", "train-1"] and all(len(graphs) == 1 for graphs in jobs.values()), jobs
    assert_data_roles_ended_with_the_chief(backend, name, workdir)


def test_a_resubmitted_training_reads_its_own_changed_pipeline_from_a_kept_journal(tmp_path):
    """Run 1's pipeline yields 1, run 2's (the same model dir, so the same dispatcher journal)
    yields 2: run 2 reads 2, and goes on reading 2 through a dispatcher restarted on the journal.
    With a fixed job name TF's dispatcher handed run 2 run 1's job: it read 1s."""
    done = subprocess.run(
        [sys.executable, str(PROBES / "data_service_rerun.py"), str(tmp_path / "data-service")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["run1"] == [1] * 5, result
    assert result["resumed_datasets"] == 1, result  # run 2's dispatcher did replay run 1's journal
    assert result["run2"] == [2] * 5 and result["run2_after_restart"] == [2] * 5, result
    assert result["run1_job"] != result["run2_job"], result
    measure(
        f"data service rerun on a kept journal: run 1 read {result['run1']}, run 2 read {result['run2']} "
        f"({result['run2_job']})"
    )
