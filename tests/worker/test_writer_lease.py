"""A writer replaced while it still runs (its node declared lost during a partition) stops at
its next save instead of writing the model dir alongside its replacement (worker/model_dir/writer_lease.py).

Real TensorFlow clusters run by LocalBackend. The replacement's start is played by taking the
lease the way a new writer does (Lease.take in this process) while the old chief trains.
"""

from __future__ import annotations

import pytest
from local_clusters import (
    ONE_PS_WORKER,
    Submission,
    attempts,
    events,
    make_spec,
    measure,
    run_files,
    wait_until,
    worker_args,
)

from worker.context import TaskContext
from worker.contract import Role, Strategy
from worker.errors import EXIT_SUPERSEDED
from worker.model_dir import writer_lease

pytestmark = pytest.mark.process

# The lease is taken at the first save (step EVERY); the old chief must stop at the second.
STEPS, EVERY, TIMEOUT = 600, 200, 420
CASES = {  # name: (strategy, loop)
    "ps-custom": ("parameter_server", "custom"),  # roles/coordinator.py's check
    "mirrored-fit": ("mirrored", "fit"),  # roles/fit_loop.py's callback
    "mirrored-custom": ("mirrored", "custom"),  # roles/synchronous.py's (MWMS and mirrored)
}


def _step(backend, name) -> int:
    runs = attempts(backend, name, "chief", 0)
    return max(
        (
            r["step"]
            for r in (runs[-1] if runs else [])
            if r["event"] in ("first_step", "block", "epoch") and r.get("step") is not None
        ),
        default=0,
    )


@pytest.mark.parametrize("case", list(CASES))
def test_a_replaced_writer_stops_at_its_next_save(backend, case):
    strategy, loop = CASES[case]
    name = f"lease-{case}"
    roles = ONE_PS_WORKER if strategy == "parameter_server" else None  # the chief's lease is the subject
    spec = make_spec(name, strategy, worker_args(STEPS, EVERY, loop), evaluator=False, backoffLimit=0, roles=roles)
    run = Submission(backend, spec)
    wait_until(lambda: run.still_running() and _step(backend, name) >= EVERY, TIMEOUT, f"{name} at step {EVERY}")
    model_dir = run_files(backend, name).dir / "model"
    old = writer_lease.Lease(str(model_dir), {"token": "?"}).holder()
    assert old is not None and old["task"] == "chief-0", old
    replacement = TaskContext(
        strategy=Strategy(strategy),
        role=Role.CHIEF,
        index=0,
        cluster={},
        model_dir=str(model_dir),
        program_module="unused",
        peer_timeout_seconds=1,
    )
    taken = writer_lease.Lease.take(replacement)
    taken_at_step = _step(backend, name)

    assert run.wait(TIMEOUT) == EXIT_SUPERSEDED, backend.status(name)
    saved = [r["step"] for r in events(backend, name, "chief", 0, "checkpoint")]
    saved += [r["step"] for r in events(backend, name, "chief", 0, "epoch") if loop == "fit"]
    assert max(saved) <= 2 * EVERY, saved  # nothing after the interval the takeover fell in
    assert not (model_dir / "FINAL.json").exists()
    assert writer_lease.Lease(str(model_dir), {"token": "?"}).holder() == taken.record
    reason = next(r for r in backend.status(name).roles if r.role == "chief").reason
    assert "is now written by chief-0 in pod" in reason and "not saving" in reason, reason
    measure(
        f"writer lease, {case}: lease taken over at step {taken_at_step}; old chief exit "
        f"{EXIT_SUPERSEDED}, last save step {max(saved)}: {reason}"
    )


def test_a_writer_replaced_during_its_last_save_exports_nothing(backend, probe_programs_importable):
    """The takeover lands while the last checkpoint is written (tests/worker/probes/
    takeover_at_last_save.py): the saves' checks all passed, so only the check before the final
    SavedModel keeps the old writer from exporting and marking FINAL.json over its replacement."""
    steps, every = 60, 30
    program_args = worker_args(steps, every)
    spec = make_spec(
        "lease-final",
        "mirrored",
        program_args,
        evaluator=False,
        backoffLimit=0,
        program={"module": "takeover_at_last_save", "args": program_args},
        env={"PROBE_TAKEOVER_STEP": str(steps)},
    )
    code = Submission(backend, spec).wait(TIMEOUT)
    model_dir = run_files(backend, "lease-final").dir / "model"
    saved = [r["step"] for r in events(backend, "lease-final", "chief", 0, "checkpoint")]
    reason = next(r for r in backend.status("lease-final").roles if r.role == "chief").reason
    assert code == EXIT_SUPERSEDED, backend.status("lease-final")
    assert saved[-1] == steps, saved  # the last save was written: the takeover came during it
    assert "not saving the final SavedModel" in reason, reason
    assert not (model_dir / "FINAL.json").exists()
    assert not (model_dir / "saved_model").exists()
    measure(f"writer lease, taken during the last save (step {steps}): exit {code}, no export: {reason}")
