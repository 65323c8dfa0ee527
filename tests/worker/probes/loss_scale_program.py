"""A training program whose build_optimizer returns a LossScaleOptimizer (as a user's mixed
precision program would): the worker must scale the loss and unscale the gradients with it."""

import tensorflow as tf

from worker.examples.fashion_mnist import build_dataset, build_model  # noqa: F401
from worker.examples.fashion_mnist import build_optimizer as plain_optimizer


def build_optimizer():
    return tf.keras.mixed_precision.LossScaleOptimizer(plain_optimizer())
