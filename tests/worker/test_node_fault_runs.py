"""Node faults in real runs through LocalBackend (this machine has no GPU and no CUDA): each is
retried in a new attempt and counted (backoffLimit 1: two attempts, then the run fails with
exit 9), and `status` names the node, where the program's own mistakes fail once with exit 2
(test_causes.py, test_changed_model.py)."""

from __future__ import annotations

import socket

import pytest
from job_controller import first_pod_failure, out_of_retries, termination_message
from local_clusters import Submission, attempts, make_spec, run_files

from launcher.cluster_spec.spec import ClusterSpec
from worker.contract import EXIT_CONFIG, EXIT_NODE_FAULT

pytestmark = pytest.mark.process

ARGS = ["--steps", "20", "--checkpoint-every", "10", "--global-batch-size", "32", "--data", "digits"]
MORE_STEPS = ["--steps", "30", *ARGS[2:]]
TIMEOUT = 300
NODE = socket.gethostname()  # a local task names its host


def failed_as_node_fault(backend, spec: ClusterSpec, code: int) -> str:
    """The run ended with the chief's exit 9 after two counted attempts; its reason. The same
    fault on Kubernetes (parity): the chief's pods with this task's exit code and termination
    message are retried, counted, until its Job is out of retries, and `status` then says Failed
    with the same exit code and cause."""
    name = spec.name
    status = backend.status(name)
    [chief] = [r for r in status.roles if r.role == "chief"]
    print(f"{name}: exit {code}, {len(attempts(backend, name, 'chief', 0))} attempts, {chief.reason}")
    assert code == EXIT_NODE_FAULT and status.phase == "Failed", status
    assert len(attempts(backend, name, "chief", 0)) == 2  # retried once, then backoffLimit 1
    assert f"node fault on node {NODE}: " in chief.reason, chief.reason

    message = termination_message(run_files(backend, name).last_attempt_tail("chief", 0))
    actions, on_kubernetes = out_of_retries(spec, "chief", code, message)
    assert actions == ["Count", "Count"], actions  # retried once there too, each counted
    assert on_kubernetes.phase.value == "Failed" and on_kubernetes.exit_code == code, on_kubernetes
    assert message in on_kubernetes.message and message in chief.reason, (on_kubernetes.message, chief.reason)
    return chief.reason


def test_a_missing_libcuda_is_retried_and_names_the_node(backend, tmp_path, monkeypatch):
    (tmp_path / "needs_cuda.py").write_text(
        "raise ImportError('libcuda.so.1: cannot open shared object file: No such file or directory')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    spec = make_spec(
        "nocuda", "mirrored", ARGS, evaluator=False, backoffLimit=1, program={"module": "needs_cuda", "args": ARGS}
    )
    reason = failed_as_node_fault(backend, spec, Submission(backend, spec).wait(TIMEOUT))
    assert "program module 'needs_cuda' does not import: ImportError: libcuda.so.1: cannot open" in reason


def test_a_gpu_role_on_a_tensorflow_built_without_cuda_fails_once_as_the_images_fault(backend):
    """This machine's TensorFlow (tensorflow-cpu, tf.test.is_built_with_cuda() False) sees no GPU
    on any node. Before: a node fault, exit 9, retried (7 pods per task) with `kubectl cordon`."""
    data = make_spec("nogpu", "mirrored", ARGS, evaluator=False, backoffLimit=1).model_dump(by_alias=True)
    data["roles"]["chief"]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    code = Submission(backend, ClusterSpec.model_validate(data)).wait(TIMEOUT)
    status = backend.status("nogpu")
    [chief] = [r for r in status.roles if r.role == "chief"]
    print(f"nogpu: exit {code}, {len(attempts(backend, 'nogpu', 'chief', 0))} attempts, {chief.reason}")
    assert code == EXIT_CONFIG and status.phase == "Failed", status
    assert len(attempts(backend, "nogpu", "chief", 0)) == 1  # not retried
    assert chief.reason.startswith(
        "chief-0: exited 2 (deterministic: not retried): this task was given 1 GPU(s) (TFK8S_GPUS, the role's "
        "nvidia.com/gpu limit) and the image's TensorFlow is "
        "built without CUDA (tf.test.is_built_with_cuda() is False"
    ), chief.reason
    assert "use a GPU image, with tensorflow[and-cuda] installed" in chief.reason and "node fault" not in chief.reason
    # Kubernetes, the same fault: FailJob at the first pod, Failed with the same code and cause
    message = termination_message(run_files(backend, "nogpu").last_attempt_tail("chief", 0))
    action, on_kubernetes = first_pod_failure(ClusterSpec.model_validate(data), "chief", code, message)
    assert action == "FailJob" and on_kubernetes.phase.value == "Failed" and on_kubernetes.exit_code == code
    assert message in on_kubernetes.message and message in chief.reason, (on_kubernetes.message, chief.reason)


def test_a_mixed_float16_checkpoint_on_a_node_without_a_gpu_is_a_node_fault(backend, probe_programs_importable):
    """Trained with loss scaling (what --mixed-precision's mixed_float16 adds on a GPU; the probe
    program adds it here), resumed where TF sees no GPU, so --mixed-precision picks
    mixed_bfloat16 and the model has no loss scale: the node's fault, not a changed program."""

    def spec(args, **env):
        args = [*args, "--mixed-precision"]
        program = {"module": "resized_program", "args": args}
        return make_spec("flipped", "mirrored", args, evaluator=False, backoffLimit=1, program=program, env=env)

    assert Submission(backend, spec(ARGS, PROBE_LOSS_SCALE="1")).wait(TIMEOUT) == 0
    resumed = spec(MORE_STEPS)
    reason = failed_as_node_fault(backend, resumed, Submission(backend, resumed, replace=True).wait(TIMEOUT))
    assert "the checkpoint was trained with loss scaling (optimizer/" in reason, reason
    assert "TensorFlow sees no GPU on this node, so this task would train mixed_bfloat16" in reason
