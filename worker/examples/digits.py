"""A small built-in training program: scikit-learn's 8x8 digits at their own size, one hidden layer.

Implements the interface in worker/program.py; select it with `program.module:
worker.examples.digits`. Same data and split as the built-in program's `--data digits`, without
the resize to 28x28 and the CNN: a parameter-server step costs a fraction of the CPU (see
docs/benchmarks.md), so a cluster trains hundreds of steps in seconds on a laptop's CPU. For
trying a cluster out, and for tests whose subject is not the model (mixed precision, fit
resume). `--data`: digits only.
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from worker import errors
from worker.examples import fashion_mnist

IMAGE_SHAPE = (8, 8, 1)
LEARNING_RATE = 1e-2  # 400 PS steps reached 0.98-0.99 test accuracy


def build_model():
    keras = tf.keras
    return keras.Sequential(
        [
            keras.Input(shape=IMAGE_SHAPE),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(fashion_mnist.NUM_CLASSES),  # logits: the loss applies the softmax
        ]
    )


def build_dataset(split: str, batch_size: int, input_context=None, data: str = "digits"):
    if data != "digits":
        raise errors.ConfigError(
            f"--data {data!r}: worker.examples.digits trains on the 8x8 digits only (--data "
            "digits); for other data use the built-in worker.examples.fashion_mnist"
        )
    images, labels = _arrays()[fashion_mnist.check_split(split)]
    return fashion_mnist.pipeline(images, labels, split, batch_size, input_context)


def build_optimizer():
    return tf.keras.optimizers.Adam(learning_rate=LEARNING_RATE)


@functools.lru_cache(maxsize=None)
def _arrays() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    small, labels = fashion_mnist.digits_8x8()
    images = np.round(small * (255 / 16)).astype(np.uint8)[..., None]  # 0..16 -> 0..255
    return fashion_mnist.split_digits(images, labels)
