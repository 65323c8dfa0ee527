"""A training program whose save at a preemption (after SIGTERM) takes SLOW_SAVE_SECONDS
(default 12) more: the built-in model plus a trackable that sleeps while it is serialized, as a
large model on a slow volume would. For whole-cluster preemption tests: the servers must outlast
the chief's save. Only that save sleeps: the periodic ones before it and those of the resumed
attempt are not what the test is about, and each of them made the test wait 12 s more with the
CPU idle. Exports (traced, not eager) do not sleep."""

import os
import time

import tensorflow as tf

from worker.examples.fashion_mnist import build_dataset, build_optimizer  # noqa: F401
from worker.examples.fashion_mnist import build_model as _build_model
from worker.lifecycle import preemption

SECONDS = float(os.environ.get("SLOW_SAVE_SECONDS", "12"))


class SlowToSave(tf.__internal__.tracking.Trackable):
    def _serialize_to_tensors(self):
        if not tf.executing_eagerly() or not preemption.requested():
            return {"slept": tf.constant(0.0)}
        started = time.monotonic()
        time.sleep(SECONDS)
        print(f"slow_save: checkpoint delayed {time.monotonic() - started:.1f} s", flush=True)
        return {"slept": tf.constant(SECONDS)}

    def _restore_from_tensors(self, restored_tensors):
        return tf.no_op()


def build_model():
    model = _build_model()
    model.slow_to_save = SlowToSave()
    return model
