"""The built-in training program: the TF distribution tutorials' Fashion-MNIST CNN.

Implements the interface in worker/program.py. Data sources (the worker's --data):
- digits (default): scikit-learn's bundled 8x8 digits, resized to 28x28 and split 1500 train /
  297 test. Its file ships inside scikit-learn (and the worker image), so it works offline.
- synthetic: generated 28x28 images, one noisy template per class; learnable, no dependency.
- fashion_mnist: keras.datasets.fashion_mnist.load_data() (downloads 30 MB once per machine).
- /path/to/file.npz: arrays x_train, y_train, x_test, y_test (the Keras mnist.npz layout: 28x28
  uint8 images, integer labels), e.g. a Fashion-MNIST copy made where there is internet.

All sources give uint8 images; batches are scaled to [0, 1] float32 in the pipeline, which keeps
the arrays the parameter-server coordinator ships to each worker 4x smaller.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

from worker import errors  # ConfigError: a data mistake no restart cures (exit 2, not retried)

IMAGE_SHAPE = (28, 28, 1)
NUM_CLASSES = 10
LEARNING_RATE = 1e-3
DIGITS_TRAIN_EXAMPLES = 1500
SYNTHETIC_TRAIN_EXAMPLES = 4096
SYNTHETIC_TEST_EXAMPLES = 512


def build_model():
    keras = tf.keras
    return keras.Sequential(
        [
            keras.Input(shape=IMAGE_SHAPE),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(NUM_CLASSES),  # logits: the loss applies the softmax
        ]
    )


def build_optimizer():
    return tf.keras.optimizers.Adam(learning_rate=LEARNING_RATE)


def build_dataset(split: str, batch_size: int, input_context=None, data: str = "digits"):
    images, labels = load_arrays(data)[check_split(split)]
    return pipeline(images, labels, split, batch_size, input_context)


def check_split(split: str) -> str:
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return split


def pipeline(images, labels, split: str, batch_size: int, input_context=None):
    """uint8 images and int labels -> the batched, sharded, [0, 1]-scaled dataset."""
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if split == "train":
        # Unseeded: parameter-server workers each build this pipeline and must not all see
        # the same batches in the same order.
        dataset = dataset.shuffle(len(images), reshuffle_each_iteration=True).repeat()
    dataset = dataset.batch(batch_size, drop_remainder=(split == "train"))
    return dataset.map(_scale, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _scale(images, labels):
    return tf.cast(images, tf.float32) / 255.0, tf.cast(labels, tf.int32)


@functools.lru_cache(maxsize=None)
def load_arrays(data: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{"train": (images, labels), "test": (...)}; images uint8 [N, 28, 28, 1], labels int32."""
    if data == "digits":
        return _digits()
    if data == "synthetic":
        return _synthetic()
    if data == "fashion_mnist":
        return _fashion_mnist()
    if data.endswith(".npz"):
        return _npz(data)
    raise errors.ConfigError(f"--data {data!r}: use digits, synthetic, fashion_mnist or a path to a .npz file")


def _digits():
    small, labels = digits_8x8()
    # 8x8 images with values 0..16 -> 28x28 by bilinear zoom (x3.5) -> 0..255.
    large = _zoom_bilinear(small / 16.0, 28).astype(np.float32)
    images = np.clip(large * 255.0, 0, 255).astype(np.uint8)[..., None]
    return split_digits(images, labels)


def split_digits(images: np.ndarray, labels: np.ndarray) -> dict:
    """The fixed 1500 train / 297 test split of the digits (worker/examples/digits.py too)."""
    order = np.random.default_rng(0).permutation(len(images))
    train, test = order[:DIGITS_TRAIN_EXAMPLES], order[DIGITS_TRAIN_EXAMPLES:]
    return {"train": (images[train], labels[train]), "test": (images[test], labels[test])}


# The worker image carries scikit-learn's digits file without scikit-learn (and its 200 MB of
# scipy): the Dockerfile copies it here. A virtualenv made like the image (the tests' task
# environment, scripts/task_env.sh) carries it under its prefix. Elsewhere it is read from the
# installed scikit-learn, found without importing it (which would cost a second of start-up).
IMAGE_DIGITS_CSV = Path(__file__).resolve().parents[2] / "data" / "digits.csv.gz"
ENV_DIGITS_CSV = Path(sys.prefix) / "share" / "tfk8s" / "digits.csv.gz"


def digits_csv_path() -> Path:
    for carried in (IMAGE_DIGITS_CSV, ENV_DIGITS_CSV):
        if carried.is_file():
            return carried
    sklearn = importlib.util.find_spec("sklearn")
    if sklearn is not None and sklearn.origin:
        packaged = Path(sklearn.origin).parent / "datasets" / "data" / "digits.csv.gz"
        if packaged.is_file():
            return packaged
    raise errors.ConfigError(
        f"--data digits reads scikit-learn's digits.csv.gz: not found at {IMAGE_DIGITS_CSV}, "
        f"{ENV_DIGITS_CSV} nor "
        "in an installed scikit-learn; pip install scikit-learn, or use --data synthetic"
    )


def digits_8x8() -> tuple[np.ndarray, np.ndarray]:
    """float64 images [N, 8, 8] with values 0..16, int32 labels: what sklearn's load_digits
    returns, read from the same file (64 pixel columns, then the label)."""
    rows = np.loadtxt(digits_csv_path(), delimiter=",")
    return rows[:, :-1].reshape(-1, 8, 8), rows[:, -1].astype(np.int32)


def _zoom_bilinear(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize of [N, h, h] to [N, size, size] with the corners aligned: the output
    of scipy.ndimage.zoom(order=1), which this replaces, to the last uint8."""
    n = images.shape[1]
    position = np.arange(size) * (n - 1) / (size - 1)
    low = np.minimum(np.floor(position).astype(int), n - 2)
    weight = position - low
    rows = images[:, low, :] * (1 - weight)[None, :, None] + images[:, low + 1, :] * weight[None, :, None]
    return rows[:, :, low] * (1 - weight)[None, None, :] + rows[:, :, low + 1] * weight[None, None, :]


def _synthetic():
    rng = np.random.default_rng(0)
    templates = rng.uniform(0, 255, size=(NUM_CLASSES, *IMAGE_SHAPE))

    def make(count):
        labels = rng.integers(0, NUM_CLASSES, size=count).astype(np.int32)
        noise = rng.normal(0, 60, size=(count, *IMAGE_SHAPE))
        images = np.clip(templates[labels] + noise, 0, 255).astype(np.uint8)
        return images, labels

    return {"train": make(SYNTHETIC_TRAIN_EXAMPLES), "test": make(SYNTHETIC_TEST_EXAMPLES)}


def _fashion_mnist():
    try:
        (x_train, y_train), (x_test, y_test) = tf.keras.datasets.fashion_mnist.load_data()
    except Exception as exc:  # keras raises a bare Exception for download failures
        raise RuntimeError(
            f"--data fashion_mnist: could not download Fashion-MNIST ({exc}). Without "
            "internet, use --data digits, or an .npz copy made elsewhere with "
            "numpy.savez(path, x_train=..., y_train=..., x_test=..., y_test=...)"
        ) from None
    return {"train": _as_images(x_train, y_train), "test": _as_images(x_test, y_test)}


def _npz(path: str):
    if not os.path.exists(path):
        raise errors.ConfigError(
            f"--data {path}: no such file on this task's filesystem: mount it into the pod, or copy it there"
        )
    with np.load(path) as arrays:
        missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in arrays]
        if missing:
            raise errors.ConfigError(f"--data {path}: missing arrays {', '.join(missing)} (has {', '.join(arrays)})")
        return {
            "train": _as_images(arrays["x_train"], arrays["y_train"]),
            "test": _as_images(arrays["x_test"], arrays["y_test"]),
        }


def _as_images(images: np.ndarray, labels: np.ndarray):
    images = np.asarray(images)
    if images.ndim == 3:
        images = images[..., None]
    if images.shape[1:] != IMAGE_SHAPE:
        raise errors.ConfigError(f"--data: images have shape {images.shape[1:]}, the model needs {IMAGE_SHAPE}")
    if images.dtype != np.uint8:
        raise errors.ConfigError(f"--data: images are {images.dtype}; give uint8 pixels 0..255")
    return images, np.asarray(labels).astype(np.int32).reshape(-1)
