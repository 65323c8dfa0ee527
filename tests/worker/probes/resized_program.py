"""The digits program with a model a user edits between runs: PROBE_HIDDEN sets the hidden
layer's width (64 as in worker.examples.digits), PROBE_EXTRA_LAYER=1 appends a layer (new
variables, every earlier shape unchanged). PROBE_LOSS_SCALE=1 wraps the optimizer in a
LossScaleOptimizer, as --mixed-precision does on a GPU (mixed_float16), which this machine has not."""

import os

import tensorflow as tf

from worker.examples.digits import IMAGE_SHAPE, build_dataset  # noqa: F401
from worker.examples.digits import build_optimizer as plain_optimizer
from worker.examples.fashion_mnist import NUM_CLASSES


def build_model():
    keras = tf.keras
    layers = [
        keras.Input(shape=IMAGE_SHAPE),
        keras.layers.Flatten(),
        keras.layers.Dense(int(os.environ.get("PROBE_HIDDEN", "64")), activation="relu"),
        keras.layers.Dense(NUM_CLASSES),
    ]
    if os.environ.get("PROBE_EXTRA_LAYER") == "1":
        layers.append(keras.layers.Dense(NUM_CLASSES))
    return keras.Sequential(layers)


def build_optimizer():
    if os.environ.get("PROBE_LOSS_SCALE") == "1":
        return tf.keras.mixed_precision.LossScaleOptimizer(plain_optimizer())
    return plain_optimizer()
