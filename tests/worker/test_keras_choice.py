"""Keras 3 where it cannot train multi-worker is refused when a program of your own first uses
it (worker/keras_check.py, put on the tasks' start by --local as by the worker image), in one
line naming the fix, one attempt; the same tutorial programs on tf_keras (TF_USE_LEGACY_KERAS=1)
train to the end, the optimizer's iterations equal to the steps."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from local_clusters import Submission, attempts, make_spec, measure, run_files

from worker import contract, keras_check

PROGRAM = str(Path(__file__).parent / "probes" / "keras_choice_program.py")
STEPS = 6


def program_spec(
    backend, name: str, strategy: str, args: list[str], env: dict | None = None, fatal=(1,), roles: dict | None = None
):
    """A cluster of keras_choice_program.py, backoffLimit 3, fatalExitCodes `fatal` (by default
    [1], Python's uncaught exception: docs/keras.md's advice for a program of your own)."""
    spec = make_spec(name, strategy, [], evaluator=False, backoffLimit=3, env=env or {}, roles=roles)
    data = spec.model_dump(by_alias=True)
    data.pop("program")
    data.update(command=[backend.config.task_python, PROGRAM], args=args, fatalExitCodes=list(fatal))
    return type(spec).model_validate(data)


def run(backend, spec) -> tuple[int, float]:
    started = time.monotonic()
    code = Submission(backend, spec).wait(240)
    return code, time.monotonic() - started


@pytest.mark.process
@pytest.mark.parametrize(
    "strategy, loop, refusal",
    [
        ("multi_worker_mirrored", "fit", keras_check.REFUSALS[keras_check.MULTI_WORKER_FIT]),
        ("parameter_server", "custom", keras_check.REFUSALS[keras_check.PARAMETER_SERVER]),
    ],
    ids=["mwms-fit", "ps-custom"],
)
def test_keras_3_where_it_cannot_train_is_refused_at_start_once(backend, strategy, loop, refusal):
    """Before: Keras 3's fit under MWMS failed deep in Keras (`... with an unsupported type
    (<class '...PerReplica'>) to a Tensor.`) and a PS custom loop "succeeded" with lost updates."""
    name = f"k3-{loop}"
    # no fatalExitCodes: the refusal's own code is fatal
    code, seconds = run(backend, program_spec(backend, name, strategy, [loop, str(STEPS)], fatal=()))
    status = backend.status(name)
    measure(f"Keras 3 {strategy} {loop} refused: exit {code} in {seconds:.1f} s: {status.message}")
    assert code == keras_check.EXIT_REFUSED == contract.EXIT_KERAS_REFUSED and status.phase == "Failed", status
    assert refusal in status.message and "(deterministic: not retried)" in status.message, status.message
    assert "set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported" in status.message  # the fix
    first_task = "worker" if strategy == "multi_worker_mirrored" else "chief"
    log = run_files(backend, name).log_path(first_task, 0).read_text()
    assert log.count("=== tfk8s: ") == 1 and "iterations=" not in log, log[-2000:]
    assert len(attempts(backend, name, first_task, 0)) <= 1


@pytest.mark.process
@pytest.mark.parametrize("strategy, loop", [("multi_worker_mirrored", "fit"), ("parameter_server", "custom")])
def test_the_same_programs_on_tf_keras_train_every_step(backend, strategy, loop):
    name = f"tfk-{loop}"
    code, seconds = run(
        backend, program_spec(backend, name, strategy, [loop, str(STEPS)], env={"TF_USE_LEGACY_KERAS": "1"})
    )
    measure(f"tf_keras {strategy} {loop}: exit {code} in {seconds:.1f} s")
    assert code == 0, backend.status(name)
    trainer = "worker" if strategy == "multi_worker_mirrored" else "chief"
    log = run_files(backend, name).log_path(trainer, 0).read_text()
    assert re.findall(r"^iterations=(\d+)$", log, re.M) == [str(STEPS)], log[-2000:]
    assert "Keras 3" not in log


@pytest.mark.process
def test_keras_3_fit_under_a_one_worker_mwms_trains_every_step_unrefused(backend):
    """One worker of one device: one replica in the cluster, no all-reduce for Keras 3 to get
    wrong; its fit trains. Before: refused, exit 78 (`Keras 3's Model.fit cannot train under
    MultiWorkerMirroredStrategy`). Two workers stay refused (the test above)."""
    name = "k3-fit-one"
    spec = program_spec(backend, name, "multi_worker_mirrored", ["fit", str(STEPS)], fatal=(), roles={"worker": 1})
    code, seconds = run(backend, spec)
    status = backend.status(name)
    measure(f"Keras 3 one-worker MWMS fit: exit {code} in {seconds:.1f} s: {status.message}")
    assert code == 0 and status.phase == "Succeeded", status
    log = run_files(backend, name).log_path("worker", 0).read_text()
    assert re.findall(r"^iterations=(\d+)$", log, re.M) == [str(STEPS)], log[-2000:]
    assert "tfk8s worker-0: warning" not in log and "Keras 3" not in log, log[-2000:]


@pytest.mark.process
def test_a_keras_3_mwms_custom_loop_with_a_shape_bug_fails_once_with_its_value_error(backend):
    """The tutorial's custom loop trains under Keras 3 (one warning line); its bug is the cause."""
    name = "k3-shape"
    code, seconds = run(
        backend, program_spec(backend, name, "multi_worker_mirrored", ["custom", str(STEPS), "--shape-bug"])
    )
    status = backend.status(name)
    measure(f"Keras 3 MWMS custom loop, shape bug: exit {code} in {seconds:.1f} s: {status.message}")
    # a ValueError: the exception check's deterministic exit, whatever fatalExitCodes says
    assert code == contract.EXIT_DETERMINISTIC_EXCEPTION and status.phase == "Failed", status
    assert "ValueError: " in status.message and "(a ValueError is deterministic: not retried" in status.message
    assert status.message.count("not retried") == 1, status.message  # the verdict said once
    assert "ValueError: Input 0 with name 'None' of layer 'dense' is incompatible" in status.message, status.message
    assert "expected axis -1 of input shape to have value 8" in status.message, status.message
    for index in (0, 1):
        log = run_files(backend, name).log_path("worker", index).read_text()
        assert log.count("=== tfk8s: ") == 1
        assert log.count(keras_check.WARNING) == 1, log[-3000:]
