"""Faults injected with SIGKILL into real parameter-server clusters run by LocalBackend.

The clusters train the paced probe program (probes/paced_program.py: the small digits model,
each step held for a set time), not the built-in CNN: the subject is what the cluster does
around a kill, and a set pace puts the kill where the test wants it (after a checkpoint, well
before the end) on a fast or a loaded machine alike, without hundreds of CNN steps of margin.
"""

from __future__ import annotations

import signal
import time

import pytest
from job_controller import out_of_retries
from local_clusters import (
    Submission,
    assert_no_task_processes,
    attempts,
    events,
    final_marker,
    kill_task,
    make_spec,
    measure,
    metrics,
    run_files,
    wait_until,
    worker_args,
)

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("probe_programs_importable")]

STEPS = 300
EVERY = 50
ARGS = worker_args(STEPS, EVERY)
# The killed worker must be back before training ends, and the chief's blocks must be short
# enough to show progress while it is down, even on a loaded machine (restart measured 5-15 s):
# at PS_STEP_SECONDS a step, the 450 steps after the kill take over 20 s on the one worker left.
LONG_ARGS = worker_args(500, 25)
TIMEOUT = 420
# Per input pipeline, so per worker. The CNN these runs trained before went at 40-45 steps/s on
# two PS workers on 2 idle cores: as fast, without its CPU. The 200 steps after a kill at step
# 100 take 5 s (PS, 40 steps/s) and 6 s (MWMS, whose workers step together: 33 steps/s).
PS_STEP_SECONDS = 0.05
MWMS_STEP_SECONDS = 0.03


def paced_spec(name: str, strategy: str, args: list[str], step_seconds: float, **fields):
    """A spec that trains the paced probe program, `step_seconds` a step per input pipeline."""
    return make_spec(
        name,
        strategy,
        args,
        program={"module": "paced_program", "args": args},
        env={"PACED_STEP_SECONDS": str(step_seconds)},
        **fields,
    )


def checkpointed_step(backend, name) -> int:
    saved = events(backend, name, "chief", 0, "checkpoint")
    return saved[-1]["step"] if saved else 0


def trained_step(backend, name) -> int:
    done = [r for r in events(backend, name, "chief", 0, "block")]
    return done[-1]["step"] if done else 0


def test_killed_worker_restarts_in_place_and_training_finishes(backend, workdir):
    name = "kill-worker"
    spec = paced_spec(
        name, "parameter_server", LONG_ARGS, PS_STEP_SECONDS, evaluator=False, restartPolicy="OnFailure", backoffLimit=2
    )
    run = Submission(backend, spec)
    wait_until(lambda: trained_step(backend, name) >= 50, TIMEOUT, "chief past step 50")
    step_at_kill = trained_step(backend, name)
    old_pid = kill_task(backend, name, "worker", 1)
    killed_at = time.time()
    assert run.wait(TIMEOUT) == 0, backend.status(name)
    assert_no_task_processes(workdir)

    worker_attempts = attempts(backend, name, "worker", 1)
    assert len(worker_attempts) == 2, "worker-1 was not restarted exactly once"
    serving_again = [r for r in worker_attempts[1] if r["event"] == "serving"][0]
    assert backend.status(name).phase == "Succeeded"
    roles = {r.role: r for r in backend.status(name).roles}
    assert roles["worker"].failed == 1 and roles["chief"].failed == 0
    assert final_marker(backend, name)["step"] >= 500
    # Training never stopped: the chief kept completing blocks on the surviving worker.
    blocks = events(backend, name, "chief", 0, "block")
    before = [b["steps_per_s"] for b in blocks if b["wall"] < killed_at and b["steps"] > 1]
    during = [b for b in blocks if killed_at < b["wall"] < serving_again["wall"]]
    assert during, "the chief made no progress while worker-1 was down"
    during_rate = sum(b["steps"] for b in during) / sum(b["seconds"] for b in during)
    measure(
        f"fault: SIGKILL worker-1 (pid {old_pid}) at step {step_at_kill}: restarted and "
        f"serving again {serving_again['wall'] - killed_at:.1f} s later; meanwhile the chief "
        f"trained {sum(b['steps'] for b in during)} steps on worker-0 at "
        f"{during_rate:.1f} steps/s (before the kill: {max(before):.1f}); cluster finished "
        f"in {run.seconds:.1f} s"
    )


def test_killed_chief_restarts_and_resumes_from_checkpoint(backend, workdir):
    name = "kill-chief"
    # The one fault run with an evaluator: it checks the evaluation went on through the restart.
    spec = paced_spec(name, "parameter_server", ARGS, PS_STEP_SECONDS, restartPolicy="OnFailure", backoffLimit=2)
    run = Submission(backend, spec)
    wait_until(lambda: checkpointed_step(backend, name) >= 100, TIMEOUT, "a checkpoint >= 100")
    saved = checkpointed_step(backend, name)
    kill_task(backend, name, "chief", 0)
    killed_at = time.time()
    assert run.wait(TIMEOUT) == 0, backend.status(name)
    assert_no_task_processes(workdir)

    chief = attempts(backend, name, "chief", 0)
    assert len(chief) == 2
    resumed = [r for r in chief[1] if r["event"] == "start"][0]
    # Resumed from the checkpoint, not from 0 (a later one may have been written before the
    # kill landed).
    assert resumed["step"] >= saved >= 100 and resumed["restored_from"].endswith(f"ckpt-{resumed['step']}")
    first_step = [r for r in chief[1] if r["event"] == "first_step"][0]
    assert first_step["step"] == resumed["step"] + 1
    assert final_marker(backend, name)["step"] == STEPS
    # The evaluator went on through the restart and evaluated the final checkpoint.
    final = [r for r in metrics(backend, name) if r["final"]]
    assert final and final[0]["step"] == STEPS and final[0]["accuracy"] > 0.8
    measure(
        f"fault: SIGKILL chief after ckpt-{saved}: restarted chief resumed at step "
        f"{resumed['step']}, first step {first_step['wall'] - killed_at:.1f} s after the "
        f"kill ({first_step['t']:.1f} s after its own start); cluster finished in "
        f"{run.seconds:.1f} s; final accuracy {final[0]['accuracy']:.3f}"
    )


def test_killed_ps_fails_the_chief_clearly_and_a_resubmit_resumes(backend, workdir):
    name = "kill-ps"
    spec = paced_spec(
        name, "parameter_server", ARGS, PS_STEP_SECONDS, evaluator=False, restartPolicy="Never", backoffLimit=0
    )  # no replacement of the ps: its loss ends the cluster
    run = Submission(backend, spec)
    wait_until(lambda: checkpointed_step(backend, name) >= 100, TIMEOUT, "a checkpoint >= 100")
    kill_task(backend, name, "ps", 0)
    killed_at = time.time()
    exit_code = run.wait(TIMEOUT)
    failed_after = time.time() - killed_at
    # The chief had saved, so it exits EXIT_PEER_LOST (6, not counted: the ps' own SIGKILL is,
    # and used up its backoffLimit 0); a chief without its ps cannot go on: Failed, with the
    # failed task's own code, the ps' SIGKILL: 137 (docs/verdicts.md).
    assert exit_code == 128 + signal.SIGKILL, backend.status(name)
    assert_no_task_processes(workdir)
    status = backend.status(name)
    assert status.phase == "Failed" and "ps-0" in status.message, status
    # Kubernetes, the same fault (parity): the ps pod killed (137, no message of its own), counted
    # past its Job's backoffLimit 0; the training cannot go on: Failed, the same code and cause.
    actions, on_kubernetes = out_of_retries(spec, "ps", exit_code, "")
    assert actions == ["Count"] and on_kubernetes.phase.value == "Failed", on_kubernetes
    assert on_kubernetes.exit_code == exit_code, on_kubernetes
    for said in (status.message, on_kubernetes.message):
        assert "ps" in said and "killed by SIGKILL" in said, (status.message, on_kubernetes.message)
    chief_log = run_files(backend, name).log_path("chief", 0).read_text()
    error = [line for line in chief_log.splitlines() if "tfk8s chief-0: error:" in line]
    assert error and "lost contact with ps-0" in error[0] and "resume from" in error[0], error
    assert "so this restart is not counted against backoffLimit (exit 6)" in error[0], error
    last_checkpoint = checkpointed_step(backend, name)

    resubmitted_at = time.time()
    again = Submission(backend, spec, replace=True)
    assert again.wait(TIMEOUT) == 0, backend.status(name)
    assert_no_task_processes(workdir)
    resumed = events(backend, name, "chief", 0, "start")[0]
    assert resumed["step"] == last_checkpoint >= 100
    first_step = events(backend, name, "chief", 0, "first_step")[0]
    assert final_marker(backend, name)["step"] == STEPS
    measure(
        f"fault: SIGKILL ps-0: the cluster failed {failed_after:.1f} s later with the "
        f'chief\'s exit code 6 ("lost contact with ps-0 ...", not counted); resubmitted, it resumed at '
        f"step {resumed['step']} with its first step {first_step['wall'] - resubmitted_at:.1f} s "
        f"after the resubmit"
    )


def test_killed_mwms_worker_restarts_every_worker_from_the_checkpoint(backend, workdir):
    """MWMS cannot lose a worker: the survivor's collectives fail, it exits non-zero, and both
    restart in place (OnFailure) and resume from worker 0's latest checkpoint."""
    name = "kill-mwms"
    mwms = "multi_worker_mirrored"
    spec = paced_spec(name, mwms, ARGS, MWMS_STEP_SECONDS, evaluator=False, restartPolicy="OnFailure", backoffLimit=4)
    run = Submission(backend, spec)
    wait_until(
        lambda: (events(backend, name, "worker", 0, "checkpoint") or [{"step": 0}])[-1]["step"] >= 100,
        TIMEOUT,
        "worker 0's checkpoint >= 100",
    )
    kill_task(backend, name, "worker", 1)
    killed_at = time.time()
    assert run.wait(TIMEOUT) == 0, backend.status(name)
    assert_no_task_processes(workdir)
    for index in (0, 1):
        restarted = attempts(backend, name, "worker", index)
        assert len(restarted) == 2, f"worker-{index} ran {len(restarted)} times"
        resumed = [r for r in restarted[1] if r["event"] == "start"][0]
        assert resumed["step"] >= 100 and resumed["restored_from"].endswith(f"ckpt-{resumed['step']}")
        # The workers checked with a collective that they all restored this same step.
        gathered = [r for r in restarted[1] if r["event"] == "restored_steps"][0]["steps"]
        assert gathered == [resumed["step"], resumed["step"]], gathered
    assert final_marker(backend, name)["step"] == STEPS
    first_step = [r for r in attempts(backend, name, "worker", 0)[1] if r["event"] == "first_step"][0]
    measure(
        f"fault: SIGKILL MWMS worker-1: worker-0 failed too, both restarted and resumed at "
        f"step {first_step['step'] - 1}, first step {first_step['wall'] - killed_at:.1f} s "
        f"after the kill; cluster finished in {run.seconds:.1f} s"
    )
