"""Which local tasks see the GPUs (launcher/backends/local/policy.py gpu_env)."""

import sys

from launcher.backends.local.policy import gpu_env
from launcher.backends.local.tasks import plan_tasks
from launcher.cluster_spec.loader import load_text
from launcher.plan.plan import plan as make_plan
from worker import contract


def test_only_computing_tasks_see_the_gpus_and_grow_their_memory():
    assert gpu_env("parameter_server", "worker") == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert gpu_env("multi_worker_mirrored", "worker") == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert gpu_env("mirrored", "chief") == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    for strategy, role in [
        ("parameter_server", "chief"),
        ("parameter_server", "ps"),
        ("parameter_server", "evaluator"),
        ("mirrored", "evaluator"),
    ]:
        assert gpu_env(strategy, role) == {"CUDA_VISIBLE_DEVICES": ""}, (strategy, role)


def test_a_task_expects_the_gpus_its_role_is_given_where_it_sees_them():
    """TFK8S_GPUS (fewer seen: a node fault, exit 9) for the tasks that see this host's GPUs; a
    ps given GPUs runs on the CPU here, so it expects none."""
    spec = load_text(
        "name: g\nstrategy: parameter_server\nroles:\n"
        "  chief: {replicas: 1}\n"
        "  worker: {replicas: 2, resources: {limits: {nvidia.com/gpu: 2}}}\n"
        "  ps: {replicas: 1, resources: {limits: {nvidia.com/gpu: 1}}}\n"
    )
    held, planned = plan_tasks(make_plan(spec, model_dir="/tmp/model"), sys.executable)
    held.close()
    tasks = {t.name: t.env for t in planned}
    assert tasks["worker-0"][contract.GPUS] == tasks["worker-1"][contract.GPUS] == "2"
    assert contract.GPUS not in tasks["ps-0"] and contract.GPUS not in tasks["chief-0"]
