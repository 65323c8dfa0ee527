"""Loss and gradients of one global batch: 2 replicas (MirroredStrategy over 2 logical CPUs)
versus one replica with no strategy, through the worker's own step code.

Run as a separate process (logical devices must be configured before TF initialises): prints
JSON with the losses and the largest gradient difference.
"""

import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from worker import program as program_module  # noqa: E402
from worker.roles import training  # noqa: E402

GLOBAL_BATCH = 16
REPLICAS = 2

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(REPLICAS)])
program = program_module.load("worker.examples.fashion_mnist")
rng = np.random.default_rng(0)
images = rng.uniform(0, 1, size=(GLOBAL_BATCH, 28, 28, 1)).astype(np.float32)
labels = rng.integers(0, 10, size=GLOBAL_BATCH).astype(np.int32)

tf.keras.utils.set_random_seed(0)
single_model = program.build_model()
single_loss, single_grads = training.scaled_loss_and_gradients(
    single_model, program.per_example_loss, images, labels, GLOBAL_BATCH
)

strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(REPLICAS)])
with strategy.scope():
    mirrored_model = program.build_model()
mirrored_model.set_weights(single_model.get_weights())

dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(GLOBAL_BATCH)
batch = next(iter(strategy.experimental_distribute_dataset(dataset)))


@tf.function
def distributed_loss_and_gradients(batch):
    def replica(images, labels):
        return training.scaled_loss_and_gradients(
            mirrored_model, program.per_example_loss, images, labels, GLOBAL_BATCH
        )

    losses, grads = strategy.run(replica, args=batch)
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
    summed = [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in grads]
    shares = strategy.experimental_local_results(losses)
    return total, summed, shares


@tf.function
def summed_per_replica_means(batch):
    """The classic mistake the global-batch scaling avoids: a mean over each replica's batch."""

    def replica(images, labels):
        logits = mirrored_model(images, training=True)
        return tf.reduce_mean(program.per_example_loss(labels, logits))

    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica, args=batch), axis=None)


total, summed, shares = distributed_loss_and_gradients(batch)
print(
    json.dumps(
        {
            "replicas": strategy.num_replicas_in_sync,
            "per_replica_examples": [int(x.shape[0]) for x in strategy.experimental_local_results(batch[0])],
            "single_loss": float(single_loss),
            "distributed_loss": float(total),
            "replica_losses": [float(x) for x in shares],
            "summed_per_replica_means": float(summed_per_replica_means(batch)),
            "max_gradient_difference": max(float(tf.reduce_max(tf.abs(a - b))) for a, b in zip(single_grads, summed)),
            "max_gradient": max(float(tf.reduce_max(tf.abs(g))) for g in single_grads),
        }
    )
)
