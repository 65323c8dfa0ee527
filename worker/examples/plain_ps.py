"""A plain parameter-server training script, as TF users write it: it knows nothing of tfk8s.

It reads TF_CONFIG like the TensorFlow tutorial does: ps and workers start a server and block in
`server.join()` forever; the chief coordinates a few hundred steps on generated data, saves a
checkpoint and exits. Ending the servers is the launcher's job (examples/byo.yaml).

    python -m worker.examples.plain_ps --steps 200 --model-dir /ckpt/byo-ps
"""

import argparse
import os

os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
# Keras 3 (TF's default) loses optimizer updates under ParameterServerStrategy: tf_keras, chosen
# before TensorFlow is imported (docs/keras.md).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--model-dir", default="/tmp/plain_ps")
    args = parser.parse_args()

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("worker", "ps"):
        server = tf.distribute.Server(
            resolver.cluster_spec(),
            job_name=resolver.task_type,
            task_index=resolver.task_id,
            protocol=resolver.rpc_layer or "grpc",
            start=True,
        )
        print(f"{resolver.task_type} {resolver.task_id} serving", flush=True)
        server.join()
        return

    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        weights = tf.Variable(tf.zeros([4, 1]))
        optimizer = tf.keras.optimizers.SGD(0.1)

    def dataset_fn(_input_context=None):
        x = tf.random.stateless_normal([1024, 4], seed=[1, 2])
        y = tf.matmul(x, tf.constant([[1.0], [-2.0], [0.5], [3.0]]))
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32)

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def step(it):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, weights) - y))
            optimizer.apply_gradients([(tape.gradient(loss, weights), weights)])
            return loss

        return strategy.run(replica_fn, args=next(it))

    for _ in range(args.steps):
        loss = coordinator.schedule(step, args=(iterator,))
    coordinator.join()
    print(f"chief done: {args.steps} steps, last loss {loss.fetch():.4f}", flush=True)
    tf.train.Checkpoint(weights=weights).write(os.path.join(args.model_dir, "final"))
    # The coordinator can take many seconds to tear down; the work is saved, so leave now.
    os._exit(0)


if __name__ == "__main__":
    main()
