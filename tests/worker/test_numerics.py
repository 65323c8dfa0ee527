"""Numerics a user can get silently wrong: loss scaling with a LossScaleOptimizer, mixed
precision, a scalar "per-example" loss. Real TF processes through LocalBackend."""

from __future__ import annotations

import pytest
from local_clusters import (
    SMALL_PROGRAM,
    Submission,
    assert_no_task_processes,
    events,
    make_spec,
    measure,
    metrics,
    run_files,
)

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("probe_programs_importable")]

ARGS = ["--steps", "200", "--checkpoint-every", "50", "--global-batch-size", "64", "--data", "digits"]
MIN_ACCURACY = 0.8  # 200 steps on digits reach 0.95-0.98 in float32
TIMEOUT = 420


def run(backend, name, strategy, args, **fields):
    spec = make_spec(name, strategy, args, **fields)
    submission = Submission(backend, spec)
    return submission.wait(TIMEOUT), submission


def steps_per_s(backend, name, role) -> float:
    blocks = [b for b in events(backend, name, role, 0, "block") if b["steps"] > 1]
    return sum(b["steps"] for b in blocks) / sum(b["seconds"] for b in blocks)


def test_a_programs_loss_scale_optimizer_learns(backend, workdir):
    code, _ = run(backend, "lso", "mirrored", ARGS, program={"module": "loss_scale_program", "args": ARGS})
    assert code == 0, backend.status("lso")
    final = [r for r in metrics(backend, "lso") if r["final"]][0]
    # Unscaled, the optimizer divides every gradient by 2^15: accuracy stays near chance.
    assert final["accuracy"] > MIN_ACCURACY, final
    measure(f"LossScaleOptimizer from the program, mirrored: accuracy {final['accuracy']:.3f}")


def assert_config_error(backend, name, strategy, module, *phrases) -> None:
    """The chief exits 2 (a configuration error, never retried) with every phrase in its log."""
    code, _ = run(
        backend, name, strategy, ARGS, evaluator=False, backoffLimit=0, program={"module": module, "args": ARGS}
    )
    assert code == 2, backend.status(name)
    log = run_files(backend, name).log_path("chief", 0).read_text()
    for phrase in phrases:
        assert phrase in log


def test_a_loss_scale_optimizer_under_parameter_server_is_a_clear_error(backend, workdir):
    """tf_keras refuses loss scaling under ParameterServerStrategy: say so, and what to do."""
    assert_config_error(
        backend,
        "lso-ps",
        "parameter_server",
        "loss_scale_program",
        "does not support under parameter_server",
        "--mixed-precision",
    )


# Mixed precision on a CPU emulates bfloat16: the small digits program (dense layers, which
# the policy covers like convolutions) keeps the two runs to seconds.
def test_mixed_precision_on_cpu_learns(backend, workdir):
    args = [*ARGS, "--mixed-precision"]
    code, _ = run(backend, "mp", "mirrored", args, program={"module": SMALL_PROGRAM, "args": args})
    assert code == 0, backend.status("mp")
    policy = events(backend, "mp", "chief", 0, "precision")[0]["policy"]
    assert policy == "mixed_bfloat16"  # no GPU here; mixed_float16 on a GPU
    final = [r for r in metrics(backend, "mp") if r["final"]][0]
    assert final["accuracy"] > MIN_ACCURACY, final
    # The float32 run is only the speed to compare with: no evaluator (nothing checks its
    # accuracy), its final training loss beside the mixed run's.
    code, _ = run(backend, "fp32", "mirrored", ARGS, evaluator=False, program={"module": SMALL_PROGRAM, "args": ARGS})
    assert code == 0
    losses = {name: events(backend, name, "chief", 0, "block")[-1]["loss"] for name in ("mp", "fp32")}
    measure(
        f"mixed precision ({policy}, mirrored, CPU): accuracy {final['accuracy']:.3f}, last training "
        f"loss {losses['mp']:.3f} vs float32 {losses['fp32']:.3f}; {steps_per_s(backend, 'mp', 'chief'):.1f} vs "
        f"{steps_per_s(backend, 'fp32', 'chief'):.1f} steps/s"
    )
    assert_no_task_processes(workdir)


def test_a_scalar_per_example_loss_is_a_clear_error(backend, workdir):
    assert_config_error(
        backend, "scalar", "mirrored", "scalar_loss_program", "per_example_loss returned a scalar", "reduction='none'"
    )
