"""A user edits the model and resubmits onto the old model dir, with real TF clusters through
LocalBackend: the old checkpoint is never restored into a model it does not fit (no silently
different model, no retry loop), and a finished dir never hides that the new code never ran.

Each refusal is deterministic (exit 2): one attempt per task, and `status` carries the cause.
"""

from __future__ import annotations

import re

import pytest
from local_clusters import ONE_PS_WORKER, Submission, attempts, events, make_spec, run_files

from launcher.cluster_spec.loader import load_text
from worker.errors import EXIT_CONFIG

pytestmark = pytest.mark.process

PROGRAM = "resized_program"  # tests/worker/probes: PROBE_HIDDEN, PROBE_EXTRA_LAYER
ARGS = ["--steps", "20", "--checkpoint-every", "10", "--global-batch-size", "32"]
MORE_STEPS = ["--steps", "30", "--checkpoint-every", "10", "--global-batch-size", "32"]
TIMEOUT = 300


def spec_of(strategy: str, args: list[str], loop: str = "custom", **env):
    args = [*args, "--loop", loop]
    # the chief refuses the checkpoint: one PS worker is as many as that needs
    roles = ONE_PS_WORKER if strategy == "parameter_server" else None
    program = {"module": PROGRAM, "args": args}
    return make_spec("edited", strategy, args, evaluator=False, roles=roles, backoffLimit=3, program=program, env=env)


def refused(backend, strategy: str, code: int) -> list[str]:
    """The run failed at its first attempt on every training task; their reasons.

    The run's exit code is worker 0's (the chief's), 2. Under MWMS every worker refuses alike and
    whichever reports first fails the run: when another worker does, worker 0 gets the failure
    grace (launcher/backends/local/policy.py) to exit by itself; on a loaded machine it may still
    be building its model then, is stopped, and the run exits 1 with that worker's exit 2 as the
    cause."""
    status = backend.status("edited")
    assert status.phase == "Failed", status
    if code != EXIT_CONFIG:
        first = re.match(r"(worker-[1-9][0-9]*) exited 2 \(deterministic: not retried\): ", status.message)
        assert strategy.startswith("multi_worker_mirrored") and code == 1 and first, (code, status)
        assert status.message.endswith("; worker-0 was stopped"), status.message
        print(f"{strategy}: {first.group(1)} reported first; worker-0 was stopped after the grace")
    reasons = []
    for role in status.roles:
        for index in range(role.replicas):
            tries = attempts(backend, "edited", role.role, index)
            assert len(tries) == 1, f"{role.role}-{index}: {len(tries)} attempts"
        if role.failed:
            reasons.append(role.reason)
    print(f"{strategy}: status {status.phase}, reasons {reasons}")
    return reasons


# Every trainer: the custom loops of the three strategies (Keras 3 under the synchronous ones,
# tf_keras under parameter_server) and Model.fit (tf_keras, BackupAndRestore's checkpoint).
# (mirrored, custom) also has an added layer refused (check_an_added_layer_is_refused_...).
@pytest.mark.parametrize(
    "strategy,loop",
    [("mirrored", "custom"), ("multi_worker_mirrored", "custom"), ("parameter_server", "custom"), ("mirrored", "fit")],
)
def test_a_widened_or_added_layer_is_refused_at_the_first_attempt_with_the_shapes(
    backend, probe_programs_importable, strategy, loop
):
    assert Submission(backend, spec_of(strategy, ARGS, loop)).wait(TIMEOUT) == 0
    writer = "worker" if strategy == "multi_worker_mirrored" else "chief"
    # The unchanged model fits the final checkpoint: nothing to do (the marker is re-stamped
    # with this run's id, layout.py).
    assert Submission(backend, spec_of(strategy, ARGS, loop), replace=True).wait(TIMEOUT) == 0
    final = (run_files(backend, "edited").dir / "model" / "FINAL.json").read_text()
    [done] = events(backend, "edited", writer, 0, "final")
    assert done["already_finished"] is True, done
    # The same --steps first: the dir is finished, yet the widened model (in the image: no
    # code digest to compare) never trained there, so it is no "already finished" either.
    for args, case in ((ARGS, "finished dir"), (MORE_STEPS, "resume")):
        code = Submission(backend, spec_of(strategy, args, loop, PROBE_HIDDEN="96"), replace=True).wait(TIMEOUT)
        reasons = refused(backend, f"{strategy} {loop}, {case}", code)
        assert reasons
        for reason in reasons:
            assert "exited 2" in reason and "the model does not fit its checkpoint: " in reason, reason
            assert "dense/kernel is (64, 96) in the model, (64, 64) in the checkpoint" in reason, reason
        assert not events(backend, "edited", writer, 0, "start"), "the edited model started training"
        assert not events(backend, "edited", writer, 0, "final"), "the edited model read as finished"
        if case == "finished dir":  # (a larger --steps drops the marker as stale before its restore)
            assert (run_files(backend, "edited").dir / "model" / "FINAL.json").read_text() == final
    if (strategy, loop) == ("mirrored", "custom"):
        # The refused resubmit left the finished dir as it was (it only read it), so the same dir
        # serves the added layer's case: training a second one would only make it again.
        check_an_added_layer_is_refused_not_partly_restored(backend)


def check_an_added_layer_is_refused_not_partly_restored(backend) -> None:
    code = Submission(backend, spec_of("mirrored", MORE_STEPS, PROBE_EXTRA_LAYER="1"), replace=True).wait(TIMEOUT)
    [reason] = refused(backend, "mirrored", code)
    assert ("not in the checkpoint: sequential/dense_2/bias (10,); sequential/dense_2/kernel (10, 10)") in reason, (
        reason
    )
    assert not events(backend, "edited", "chief", 0, "start"), "the edited model started training"


CODE_SPEC = """\
name: shipped
strategy: mirrored
code: ./src
program: {module: train, args: [--steps, "20", --checkpoint-every, "10", --global-batch-size, "32"]}
roles: {chief: {replicas: 1}}
"""


def test_changed_code_on_a_finished_dir_is_said_not_already_finished(backend, tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    program = tmp_path / "src" / "train.py"
    program.write_text("from worker.examples.digits import *  # noqa: F401,F403\n")
    assert Submission(backend, load_text(CODE_SPEC, base_dir=tmp_path)).wait(TIMEOUT) == 0
    first = (run_files(backend, "shipped").dir / "model" / "FINAL.json").read_text()

    program.write_text(program.read_text() + "# edited: another hidden width, say\n")
    code = Submission(backend, load_text(CODE_SPEC, base_dir=tmp_path), replace=True).wait(TIMEOUT)
    status = backend.status("shipped")
    assert code == EXIT_CONFIG and status.phase == "Failed", status
    [chief] = status.roles
    print(f"changed code on a finished dir: {chief.reason}")
    assert "training already finished in " in chief.reason and "with other code" in chief.reason
    assert len(attempts(backend, "shipped", "chief", 0)) == 1
    log = run_files(backend, "shipped").log_path("chief", 0).read_text()
    assert "nothing to do" not in log
    assert (run_files(backend, "shipped").dir / "model" / "FINAL.json").read_text() == first
