"""Which local tasks see the GPUs (launcher/backends/local/policy.py gpu_env)."""

from launcher.backends.local.policy import gpu_env


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
