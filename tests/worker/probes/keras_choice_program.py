"""A program of your own as the TF tutorials write one, tiny: a PS custom loop (chief with
ClusterCoordinator; ps and workers serve) or MWMS (custom loop or Model.fit), in Keras 3
(`import keras`) or tf_keras (tf.keras with TF_USE_LEGACY_KERAS=1 in the spec's env). Prints
`iterations=N`, the optimizer's step count, at the end.

    python keras_choice_program.py custom|fit STEPS [--shape-bug]
"""

import os
import sys

import numpy as np
import tensorflow as tf

LEGACY = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
if LEGACY:
    keras = tf.keras
else:
    import keras

loop, steps = sys.argv[1], int(sys.argv[2])
features = 9 if "--shape-bug" in sys.argv else 8  # the model takes 8
GLOBAL_BATCH = 16
loss_of = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


def dataset(_context=None):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, features)).astype("float32")
    y = rng.integers(0, 4, size=64).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH)


def model_and_optimizer():
    model = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(4)])
    optimizer = keras.optimizers.SGD(learning_rate=0.1)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def replica_step(model, optimizer):
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_of(y, model(x, training=True)), global_batch_size=GLOBAL_BATCH)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    return step


resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
if os.environ["TFK8S_STRATEGY"] == "parameter_server":
    if resolver.task_type in ("worker", "ps"):
        tf.distribute.Server(
            resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id, protocol="grpc"
        ).join()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model, optimizer = model_and_optimizer()
    step = replica_step(model, optimizer)
    batches = iter(coordinator.create_per_worker_dataset(dataset))

    @tf.function
    def train_step(iterator):
        strategy.run(step, args=next(iterator))

    for _ in range(steps):
        coordinator.schedule(train_step, args=(batches,))
    coordinator.join()
else:
    strategy = tf.distribute.MultiWorkerMirroredStrategy(resolver)
    if loop == "fit":
        with strategy.scope():
            model = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(4)])
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=loss)
        model.fit(dataset(), epochs=1, steps_per_epoch=steps, verbose=2)
        optimizer = model.optimizer
    else:
        with strategy.scope():
            model, optimizer = model_and_optimizer()
        step = replica_step(model, optimizer)
        batches = iter(strategy.experimental_distribute_dataset(dataset()))

        @tf.function
        def train_step(iterator):
            strategy.run(step, args=next(iterator))

        for _ in range(steps):
            train_step(batches)
print(f"iterations={int(optimizer.iterations.numpy())}", flush=True)
sys.stdout.flush()
os._exit(0)  # a PS chief's teardown takes seconds to minutes (docs/worker.md)
