"""The digits program, whose chief loses the model dir's writer lease during its last periodic
save: while that checkpoint is written (after the lease check before it passed), a replacement
takes WRITER.json, as a new chief would when Kubernetes replaced this one mid-save. What is left
for this writer is the final SavedModel and FINAL.json, which only the check in
`training.finish` stands between. PROBE_TAKEOVER_STEP: the step of that save."""

import os

import tensorflow as tf

from worker.context import TaskContext
from worker.contract import Role, Strategy
from worker.examples.digits import build_dataset  # noqa: F401
from worker.examples.digits import build_model as _build_model
from worker.examples.digits import build_optimizer as _build_optimizer
from worker.model_dir import writer_lease

TAKEOVER_STEP = int(os.environ.get("PROBE_TAKEOVER_STEP", "0"))
_optimizer = None  # the one training uses, to read the step a save is at


def build_optimizer():
    global _optimizer
    _optimizer = _build_optimizer()
    return _optimizer


class TakeOverWhileSaved(tf.__internal__.tracking.Trackable):
    taken = False

    def _serialize_to_tensors(self):
        if tf.executing_eagerly() and not self.taken and _optimizer is not None:
            if int(_optimizer.iterations.numpy()) >= TAKEOVER_STEP:
                replacement = TaskContext(
                    strategy=Strategy(os.environ["TFK8S_STRATEGY"]),
                    role=Role.CHIEF,
                    index=0,
                    cluster={},
                    model_dir=os.environ["TFK8S_MODEL_DIR"],
                    program_module="takeover_at_last_save",
                    peer_timeout_seconds=1,
                )
                writer_lease.Lease.take(replacement)
                TakeOverWhileSaved.taken = True
                print("takeover_at_last_save: the lease was taken during this save", flush=True)
        return {"taken": tf.constant(float(self.taken))}

    def _restore_from_tensors(self, restored_tensors):
        return tf.no_op()


def build_model():
    model = _build_model()
    model.takeover = TakeOverWhileSaved()
    return model
