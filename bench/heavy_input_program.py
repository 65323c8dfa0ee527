"""The small digits program (worker/examples/digits.py) behind a deliberately CPU-heavy input
pipeline, for bench/data_service.py: each batch passes HEAVY_INPUT_ROUNDS (default 150) products of
256x256 matrices made from it (about 34 MFLOP each) before it reaches the step. All of it is
TensorFlow ops, which the tf.data service can run on its data workers (a py_function could not
leave the trainer's process)."""

import os

import tensorflow as tf

from worker.examples import digits
from worker.examples.digits import build_model, build_optimizer  # noqa: F401

ROUNDS = int(os.environ.get("HEAVY_INPUT_ROUNDS", "150"))
SIDE = 256


def build_dataset(split: str, batch_size: int, input_context=None, data: str = "digits"):
    dataset = digits.build_dataset(split, batch_size, input_context, data)
    if split != "train":
        return dataset
    return dataset.map(_heavy, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _heavy(images, labels):
    flat = tf.reshape(images, [-1])
    seed = tf.reshape(tf.tile(flat, [SIDE * SIDE // 64 + 1])[: SIDE * SIDE], [SIDE, SIDE])
    product = tf.eye(SIDE)
    for _ in range(ROUNDS):
        product = tf.tanh(tf.matmul(product, seed))
    # depends on the work (a product by 0 would be folded away), changes nothing the model sees
    return images + 1e-30 * tf.reduce_mean(product), labels
