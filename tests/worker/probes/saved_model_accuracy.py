"""Load a SavedModel exported by the chief with no strategy at all; print its test accuracy.

Run as a separate process: `python saved_model_accuracy.py <saved_model dir>` prints JSON.
"""

import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from worker.examples import fashion_mnist  # noqa: E402

images, labels = fashion_mnist.load_arrays("digits")["test"]
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
logits = serve(images=tf.constant(images.astype(np.float32) / 255.0))["logits"].numpy()
print(
    json.dumps(
        {
            "accuracy": float((logits.argmax(axis=-1) == labels).mean()),
            "strategy": type(tf.distribute.get_strategy()).__name__,
        }
    )
)
