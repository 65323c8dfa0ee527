"""The digits program with a model a user edits between runs: PROBE_HIDDEN sets the hidden
layer's width (64 as in worker.examples.digits), PROBE_EXTRA_LAYER=1 appends a layer (new
variables, every earlier shape unchanged)."""

import os

import tensorflow as tf

from worker.examples.digits import IMAGE_SHAPE, build_dataset, build_optimizer  # noqa: F401
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
