"""A training program that lives in no image and no installed package: shipped by `code:`."""

from mylib.marker import MARKER

from worker.examples.fashion_mnist import build_dataset, build_model, build_optimizer  # noqa: F401

print(f"tfk8s-code-marker {MARKER}", flush=True)
