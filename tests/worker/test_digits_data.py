"""The built-in programs' digits data, read without scikit-learn (the worker image leaves it and
scipy out): the same arrays as sklearn's load_digits zoomed by scipy, which it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from worker.examples import digits, fashion_mnist


def test_digits_match_sklearn_and_scipy_zoom_exactly():
    zoom = pytest.importorskip("scipy.ndimage").zoom
    bunch = pytest.importorskip("sklearn.datasets").load_digits()
    small = bunch.images.astype(np.float32) / 16.0
    expected = np.clip(zoom(small, (1, 28 / 8, 28 / 8), order=1) * 255.0, 0, 255).astype(np.uint8)
    order = np.random.default_rng(0).permutation(len(expected))
    arrays = fashion_mnist._digits()
    for split, rows in (("train", order[:1500]), ("test", order[1500:])):
        images, labels = arrays[split]
        np.testing.assert_array_equal(images[..., 0], expected[rows])
        np.testing.assert_array_equal(labels, bunch.target[rows])
        assert images.dtype == np.uint8 and labels.dtype == np.int32


def test_an_environment_without_scikit_learn_reads_the_file_it_carries(monkeypatch, tmp_path):
    carried = tmp_path / "share" / "tfk8s" / "digits.csv.gz"
    carried.parent.mkdir(parents=True)
    carried.write_bytes(b"")
    monkeypatch.setattr(fashion_mnist, "IMAGE_DIGITS_CSV", tmp_path / "absent.csv.gz")
    monkeypatch.setattr(fashion_mnist, "ENV_DIGITS_CSV", carried)
    monkeypatch.setattr(fashion_mnist.importlib.util, "find_spec", lambda name: None)
    assert fashion_mnist.digits_csv_path() == carried


def test_missing_digits_file_says_how_to_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(fashion_mnist, "IMAGE_DIGITS_CSV", tmp_path / "absent.csv.gz")
    monkeypatch.setattr(fashion_mnist, "ENV_DIGITS_CSV", tmp_path / "absent-too.csv.gz")
    monkeypatch.setattr(fashion_mnist.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(fashion_mnist.errors.ConfigError, match="pip install scikit-learn"):
        fashion_mnist.digits_csv_path()


def test_the_small_program_reads_the_same_digits_at_8x8_with_the_same_split():
    bunch = pytest.importorskip("sklearn.datasets").load_digits()
    order = np.random.default_rng(0).permutation(len(bunch.images))
    arrays = digits._arrays()
    for split, rows in (("train", order[:1500]), ("test", order[1500:])):
        images, labels = arrays[split]
        assert images.shape == (len(rows), 8, 8, 1) and images.dtype == np.uint8
        np.testing.assert_array_equal(images[..., 0], np.round(bunch.images[rows] * 255 / 16))
        np.testing.assert_array_equal(labels, bunch.target[rows])


def test_the_small_program_refuses_other_data_and_names_the_program_that_reads_it():
    with pytest.raises(fashion_mnist.errors.ConfigError, match="worker.examples.fashion_mnist"):
        digits.build_dataset("train", 32, data="synthetic")
