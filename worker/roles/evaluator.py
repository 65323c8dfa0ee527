"""The evaluator: follows the chief's checkpoints, evaluates each on the test split, and exits 0
after it has evaluated the final one (named by FINAL.json, see worker/model_dir/layout.py).

It never connects to the training cluster (its TF_CONFIG has an empty cluster: a PS coordinator
that sees an evaluator in its cluster waits for it forever, tensorflow#46169); it only reads the
model dir. It evaluates every checkpoint it sees: tf.train.checkpoints_iterator yields the newest
one at each poll, so when training saves faster than evaluation runs, checkpoints in between are
skipped, never the final one. Results go to <model dir>/eval/metrics.jsonl (one JSON object per
checkpoint: step, loss, accuracy, examples, checkpoint, final, evaluated_at, seconds) and to
TensorBoard summaries in <model dir>/eval/tensorboard. A restarted evaluator keeps the earlier
lines and does not evaluate those checkpoints again.
"""

from __future__ import annotations

import json
import re
import time

import tensorflow as tf

from worker import progress
from worker.args import Options
from worker.context import TaskContext
from worker.lifecycle import preemption
from worker.model_dir import layout, ownership
from worker.program import Program

POLL_SECONDS = 1.0
_STEP_KEY = re.compile(r"^optimizer/(_iterations|iter)/\.ATTRIBUTES/VARIABLE_VALUE$")


class Evaluator:
    def __init__(self, task: TaskContext, options: Options, program: Program, owner_checked: bool = False):
        self.task = task
        # Started before the writer claimed the dir: check its OWNER.json before the first
        # evaluation (the writer claims the dir before it saves any checkpoint).
        self.owner_checked = owner_checked
        self.options = options
        self.program = program
        self.model = program.build_model()  # no strategy: the evaluator is one plain process
        self.dataset = program.build_dataset("test", options.global_batch_size, None, data=options.data)
        self.metrics_path = layout.metrics_path(task.model_dir)
        self.history = _read_history(self.metrics_path)
        self.evaluated = {record["checkpoint"] for record in self.history}
        self.writer = tf.summary.create_file_writer(layout.join(layout.eval_dir(task.model_dir), layout.TENSORBOARD))
        per_example_loss = program.per_example_loss
        model = self.model

        @tf.function
        def evaluate_batch(images, labels):
            logits = tf.cast(model(images, training=False), tf.float32)  # mixed precision
            labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
            predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
            return (
                tf.reduce_sum(per_example_loss(labels, logits)),
                tf.reduce_sum(tf.cast(tf.equal(predictions, labels), tf.float32)),
                tf.cast(tf.shape(labels)[0], tf.float32),
            )

        self._evaluate_batch = evaluate_batch

    def final_marker(self) -> layout.FinalMarker | None:
        marker = layout.read_marker(self.task.model_dir)
        # this run's own final only: an earlier run's, same arguments or not, is not (layout.py)
        if (
            marker is not None
            and marker.matches(self.options.steps, self.options.loop)
            and marker.is_of_run(self.task.run)
        ):
            return marker
        return None

    def run(self) -> int:
        checkpoints = layout.checkpoint_dir(self.task.model_dir)
        progress.report("watching", checkpoints=checkpoints, already_evaluated=len(self.evaluated))
        # timeout_fn ends the iteration once training has finished and no newer checkpoint came.
        for path in tf.train.checkpoints_iterator(
            checkpoints,
            min_interval_secs=POLL_SECONDS,
            timeout=POLL_SECONDS,
            timeout_fn=lambda: self.final_marker() is not None,
        ):
            name = layout.checkpoint_name(path)
            if name not in self.evaluated:
                self.evaluate(path)
            marker = self.final_marker()
            if marker is not None and marker.checkpoint == name:
                break
        marker = self.final_marker()
        if marker.checkpoint not in self.evaluated:
            self.evaluate(marker.checkpoint_path(self.task.model_dir))
        self.mark_final(marker)
        self.writer.close()
        progress.report("evaluator_done", final=marker.checkpoint, step=marker.step, run=marker.run)
        return 0

    def evaluate(self, path: str) -> None:
        if not self.owner_checked:
            self.owner_checked = ownership.check(self.task, self.options)
        started = time.monotonic()
        try:
            step = _step_of(path)
            self._restore(path)
        except tf.errors.DataLossError as exc:
            # Network storage can show a checkpoint before all of its bytes: skip it now; the
            # final one is read again once FINAL.json names it.
            print(
                f"tfk8s: checkpoint {path} is not readable yet ({exc.message.splitlines()[0]}); skipping it", flush=True
            )
            return
        except tf.errors.NotFoundError:
            print(
                f"tfk8s: checkpoint {path} was deleted before it could be evaluated (the chief "
                f"keeps the latest --max-checkpoints {self.options.max_checkpoints}); skipping it",
                flush=True,
            )
            return
        loss_sum = correct = count = 0.0
        for images, labels in self.dataset:
            batch_loss, batch_correct, batch_count = self._evaluate_batch(images, labels)
            loss_sum += float(batch_loss)
            correct += float(batch_correct)
            count += float(batch_count)
        name = layout.checkpoint_name(path)
        record = {
            "checkpoint": name,
            "step": step,
            "loss": round(loss_sum / count, 6),
            "accuracy": round(correct / count, 6),
            "examples": int(count),
            "final": False,
            "evaluated_at": round(time.time(), 3),
            "seconds": round(time.monotonic() - started, 3),
        }
        self.history.append(record)
        self.evaluated.add(name)
        self._write_history()
        summary_step = step if step is not None else len(self.history)
        with self.writer.as_default():
            for tag in ("loss", "accuracy"):
                _write_scalar(tag, record[tag], summary_step)
        self.writer.flush()
        progress.report("evaluated", **record)

    def mark_final(self, marker: layout.FinalMarker) -> None:
        for record in self.history:
            record["final"] = record["checkpoint"] == marker.checkpoint
        self._write_history()

    def _restore(self, path: str) -> None:
        if self.options.loop == "fit":
            # tf_keras ModelCheckpoint(save_weights_only=True): the model is the root object.
            status = self.model.load_weights(path)
        else:
            status = tf.train.Checkpoint(model=self.model).restore(path)
        # The optimizer's slots are in the checkpoint but not needed here; every model
        # variable must be, or the evaluation would silently use fresh weights.
        status.expect_partial().assert_existing_objects_matched()

    def _write_history(self) -> None:
        tf.io.gfile.makedirs(layout.eval_dir(self.task.model_dir))
        temporary = f"{self.metrics_path}.tmp"
        with tf.io.gfile.GFile(temporary, "w") as out:
            for record in self.history:
                out.write(json.dumps(record, sort_keys=True) + "\n")
        tf.io.gfile.rename(temporary, self.metrics_path, overwrite=True)


def run(task: TaskContext, options: Options, program: Program, owner_checked: bool) -> int:
    preemption.unblock_in_this_thread()  # the processes the program starts get SIGTERM
    return Evaluator(task, options, program, owner_checked).run()


def _write_scalar(tag: str, value: float, step: int) -> None:
    """A TensorBoard scalar without the tensorboard package (TF 2.21 no longer depends on it,
    and tf.summary.scalar needs it): the same event TensorBoard's own scalar() writes."""
    metadata = tf.compat.v1.SummaryMetadata(plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))
    tf.summary.write(tag, tf.constant(value, tf.float32), step=step, metadata=metadata)


def _step_of(path: str) -> int | None:
    """The optimizer step stored in a checkpoint (custom and fit checkpoints both have it)."""
    reader = tf.train.load_checkpoint(path)
    for key in reader.get_variable_to_shape_map():
        if _STEP_KEY.match(key):
            return int(reader.get_tensor(key))
    print(f"tfk8s: {path} has no optimizer step variable; metrics for it have step null", flush=True)
    return None


def _read_history(path: str) -> list[dict]:
    if not tf.io.gfile.exists(path):
        return []
    with tf.io.gfile.GFile(path) as src:
        return [json.loads(line) for line in src if line.strip()]
