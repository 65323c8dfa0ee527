"""A pytest plugin for tests/test_tier_budget.py: prints each collected kind test's declared
TensorFlow trainings (its tf_trainings marker), or `skipped` when a skipif holds at collection."""

from __future__ import annotations

LINE = "tfk8s-tf-trainings"


def pytest_collection_modifyitems(items):
    for item in items:
        marker = item.get_closest_marker("tf_trainings")
        skipped = any(m.args and m.args[0] is True for m in item.iter_markers("skipif"))
        print(f"{LINE} {item.nodeid} {'skipped' if skipped else marker.args[0] if marker else 0}")
