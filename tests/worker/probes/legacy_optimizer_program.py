"""The digits program with a tf_keras optimizer: under mirrored's custom loop tf.keras is Keras 3,
whose variables a tf_keras optimizer cannot build its slots for."""

import tf_keras

from worker.examples.digits import build_dataset, build_model  # noqa: F401


def build_optimizer():
    return tf_keras.optimizers.SGD(learning_rate=0.1)
