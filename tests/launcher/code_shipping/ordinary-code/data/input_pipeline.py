"""Reads the TFRecords: gs://bucket/prefix/train-*.tfrecord or the sample beside this file."""

import tensorflow as tf

FEATURES = {
    "image": tf.io.FixedLenFeature([64], tf.float32),
    "label": tf.io.FixedLenFeature([1], tf.int64),
    "id": tf.io.FixedLenFeature([], tf.string),
}


def _parse(record):
    example = tf.io.parse_single_example(record, FEATURES)
    return tf.reshape(example["image"], (8, 8, 1)), example["label"]


def dataset(config: dict) -> tf.data.Dataset:
    files = tf.data.Dataset.list_files(config["files"], shuffle=True, seed=config.get("seed", 0))
    records = files.interleave(tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE)
    return records.map(_parse).shuffle(1024).batch(config["batch_size"]).repeat().prefetch(tf.data.AUTOTUNE)
