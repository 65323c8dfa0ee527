"""A model dir whose training already finished (FINAL.json for this run's --steps and --loop): a
resubmission has nothing to do, but only if it resubmits the program that finished the dir.

The program's model is checked against the final checkpoint with the check every resume gets
(worker/model_dir/checkpoint_match.py), wherever the program comes from (`code:` or the image):
a changed model fails there (exit 2, the variables and shapes named) instead of reading as
"already finished" beside the old model's SavedModel. Shipped code (`code:`) is compared by its
digest too: changed code with an unchanged model (another dataset or loss, say) never trained
either. The task exits whatever the outcome, so the check builds the model on the default
strategy: no strategy exists yet (MWMS must create its own before any other op) and none will.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from worker import errors
from worker.args import Options
from worker.context import TaskContext
from worker.model_dir import checkpoint_match, layout
from worker.program import Program
from worker.roles import training


def completed_marker(task: TaskContext, options: Options) -> layout.FinalMarker | None:
    """The FINAL.json of an earlier run with the same --steps and --loop, if there is one."""
    marker = layout.read_marker(task.model_dir)
    if marker is not None and marker.matches(options.steps, options.loop):
        return marker
    return None


def check_same_program(task: TaskContext, options: Options, program: Program, marker: layout.FinalMarker) -> None:
    """Raises (exit 2) unless this run's program is the one that finished the model dir."""
    final = marker.checkpoint_path(task.model_dir)
    if not tf.io.gfile.exists(final + ".index"):
        raise errors.ConfigError(
            f"{layout.marker_path(task.model_dir)} names the final checkpoint {final}, which is "
            f"missing: delete {layout.FINAL_MARKER} to train on from the latest checkpoint, or "
            "use a fresh model dir (checkpoint.dir)"
        )
    strategy = tf.distribute.get_strategy()  # the default one
    if options.loop == "fit":
        # tf_keras ModelCheckpoint(save_weights_only=True): the model is the root (as the
        # evaluator restores it); the optimizer's slots are fit's, created at its first step.
        model = training.build_model_with_variables(program)
        checkpoint_match.check(model, final, task.model_dir, ignore_under=("optimizer/",))
    else:
        model, optimizer = training.build_model_and_optimizer(program, strategy)
        checkpoint_match.check(tf.train.Checkpoint(model=model, optimizer=optimizer), final, task.model_dir)
    changed = changed_code(task, marker)
    if changed:
        raise errors.ConfigError(changed)


def claim_for_this_run(task: TaskContext, marker: layout.FinalMarker) -> None:
    """The writer re-stamps an earlier run's marker with this run's id: this run's final is the
    same checkpoint, and its evaluator waits for a marker of its own run (layout.py)."""
    if task.is_writer and task.run is not None and marker.run != task.run:
        layout.write_marker(task.model_dir, dataclasses.replace(marker, run=task.run))


def changed_code(task: TaskContext, marker: layout.FinalMarker) -> str | None:
    """Why the shipped code that finished the dir is not this run's, or None (unchanged, or
    either run had no shipped code to compare)."""
    if marker.code is None or task.code_digest is None or marker.code == task.code_digest:
        return None
    return (
        f"training already finished in {task.model_dir} (FINAL.json: step {marker.step}, "
        f"--steps {marker.requested_steps}) with other code (sha256 {marker.code[:12]} "
        f"there, {task.code_digest[:12]} now), so this code never trained. To train it on "
        "from the finished checkpoint raise --steps; to train it from scratch use a fresh "
        f"model dir (checkpoint.dir, or delete {task.model_dir}); to keep the finished "
        "model, resubmit the code that wrote it"
    )
