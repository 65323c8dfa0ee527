"""A preempted parameter-server Model.fit chief saves within the epoch: with a grace period
shorter than the epoch, the restart resumes near the step the SIGTERM met, not at the epoch's
start (worker/roles/fit_loop.py). Real TF cluster through LocalBackend; the paced probe program
sets the epoch's length (its per-batch sleep runs on the PS worker).

The grace is played by the test as the kubelet would: SIGTERM, then SIGKILL once GRACE_SECONDS
have passed with the chief still running."""

from __future__ import annotations

import signal
import time

import pytest
from local_clusters import Submission, attempts, final_marker, kill_task, make_spec, measure, wait_until, worker_args

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("probe_programs_importable")]

TIMEOUT = 420
STEPS = 300
EVERY = 100  # one epoch: 100 steps of 0.1 s on the one worker, about 10 s
STEP_SECONDS = 0.1
GRACE_SECONDS = 4.0  # shorter than an epoch
INTO_EPOCH_SECONDS = 3.0


def test_a_ps_fit_chief_sigtermed_mid_epoch_saves_within_a_grace_shorter_than_the_epoch(backend):
    name = "ps-fit-grace"
    args = worker_args(STEPS, EVERY, loop="fit")
    spec = make_spec(
        name,
        "parameter_server",
        args,
        evaluator=False,
        roles={"chief": 1, "worker": 1, "ps": 1},
        program={"module": "paced_program", "args": args},
        env={"PACED_STEP_SECONDS": str(STEP_SECONDS)},
        backoffLimit=1,  # a SIGKILL at the end of the grace is counted: the run still resumes
    )
    run = Submission(backend, spec)

    def first_attempt(event: str) -> list[dict]:
        runs = attempts(backend, name, "chief", 0)
        return [r for r in (runs[0] if runs else []) if r["event"] == event]

    # The first epoch's end, then a third of the next one (about 30 steps): the SIGTERM meets it there.
    [epoch] = wait_until(lambda: run.still_running() and first_attempt("epoch"), TIMEOUT, "the first epoch")
    time.sleep(max(0.0, epoch["wall"] + INTO_EPOCH_SECONDS - time.time()))
    kill_task(backend, name, "chief", 0, signal.SIGTERM)
    signalled = time.time()
    wait_until(lambda: first_attempt("exit") or time.time() - signalled > GRACE_SECONDS, TIMEOUT, "exit or grace")
    killed = not first_attempt("exit")
    if killed:  # the kubelet's SIGKILL at the end of the grace
        kill_task(backend, name, "chief", 0, signal.SIGKILL)
    assert run.wait(TIMEOUT) == 0, backend.status(name)
    assert final_marker(backend, name)["step"] == STEPS

    assert not killed, f"the chief outlived a {GRACE_SECONDS} s grace after its SIGTERM (killed)"
    [preempted] = first_attempt("preempted")
    [exited] = first_attempt("exit")
    second = attempts(backend, name, "chief", 0)[1]
    [start] = [r for r in second if r["event"] == "start"]
    # The restart resumes where the SIGTERM stopped the epoch, inside it, not at its start or end.
    assert start["step"] == preempted["step"], (start, preempted)
    assert epoch["step"] <= preempted["step"] < epoch["step"] + EVERY, (epoch, preempted)
    # and reaches --steps exactly: the shortened epoch counts as an epoch
    epochs = [r["step"] for r in second if r["event"] == "epoch"]
    assert epochs[-1] == STEPS, epochs
    measure(
        f"PS fit: SIGTERM to the chief {signalled - epoch['wall']:.1f} s into an epoch of {EVERY} steps "
        f"x {STEP_SECONDS} s (grace {GRACE_SECONDS} s): saved step {preempted['step']} (epoch started at "
        f"{epoch['step']}), exited {exited['wall'] - signalled:.1f} s after the signal; the restart "
        f"resumed at step {start['step']}, epochs ended at {epochs}"
    )
