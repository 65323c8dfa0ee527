"""The digits program with its model from `import keras` (Keras 3): under --loop fit and
parameter_server the worker runs tf_keras, which cannot train it."""

import keras

from worker.examples.digits import build_dataset, build_optimizer  # noqa: F401


def build_model():
    return keras.Sequential([keras.Input(shape=(8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
