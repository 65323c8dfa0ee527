"""The tiers run in tests/conftest.py's TIER_ORDER, and a tier's cluster is deleted once its
last test has torn down (support.TierResource), before the next tier starts."""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import pytest
from support import TierResource


def _root_conftest():
    # by path: under a full run `conftest` may name another directory's conftest module
    spec = importlib.util.spec_from_file_location("root_conftest", Path(__file__).parent / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


conftest = _root_conftest()


class Item:
    def __init__(self, name: str, *markers: str):
        self.name, self.markers = name, set(markers)
        self.keywords = {name: 1, **{m: 1 for m in markers}}
        self.added = []

    def get_closest_marker(self, marker: str):
        return marker if marker in self.markers else None

    def add_marker(self, mark):
        self.added.append(mark)

    def group(self):
        return next((m.args[0] for m in self.added if m.name == "xdist_group"), None)


def test_tiers_run_in_order_and_node_kill_last_among_kind():
    items = [
        Item("k1", "kind"),
        Item("kill", "kind", "node_kill"),
        Item("k2", "kind"),
        Item("u1"),
        Item("s1", "scale"),
        Item("p1", "process"),
        Item("h1", "helm"),
        Item("u2"),
    ]
    conftest.pytest_collection_modifyitems(None, None, items)
    assert [i.name for i in items] == ["u1", "u2", "p1", "h1", "s1", "k1", "k2", "kill"]


def test_each_lane_tier_is_one_xdist_group_and_the_rest_load_balance():
    items = [
        Item("k1", "kind"),
        Item("kill", "kind", "node_kill"),
        Item("u1"),
        Item("s1", "scale"),
        Item("p1", "process"),
        Item("p2", "process"),
        Item("h1", "helm"),
    ]
    conftest.pytest_collection_modifyitems(None, None, items)
    assert {i.name: i.group() for i in items} == {
        "u1": None,
        "p1": "tf-processes",
        "p2": "tf-processes",
        "h1": None,
        "s1": "scale-cluster",
        "k1": "kind-cluster",
        "kill": "kind-cluster",
    }


def test_a_tier_resource_is_released_when_the_next_test_is_of_another_tier():
    events = []

    @contextlib.contextmanager
    def cluster():
        events.append("created")
        yield "cluster"
        events.append("deleted")

    resource = TierResource("scale")
    assert resource.open(cluster()) == "cluster"
    resource.release_after(Item("s2", "scale"))
    assert events == ["created"]
    resource.release_after(Item("k1", "kind"))
    assert events == ["created", "deleted"]
    resource.close()  # at the session's end: nothing left to delete
    assert events == ["created", "deleted"]
    with pytest.raises(RuntimeError, match="ordered after another tier's test"):
        resource.open(cluster())


def test_the_last_test_of_the_session_releases_it_too():
    released = []
    resource = TierResource("kind")
    resource.open(contextlib.closing(type("C", (), {"close": lambda self: released.append(1)})()))
    resource.release_after(None)
    assert released == [1]


def test_the_hooks_release_after_the_tests_own_teardown():
    events = []

    @contextlib.contextmanager
    def cluster():
        yield "cluster"
        events.append("deleted")

    resource = TierResource("scale")
    teardown, sessionfinish = resource.hooks()
    assert teardown.pytest_impl["wrapper"]  # pluggy runs it around the other teardowns
    resource.open(cluster())
    for nextitem in (Item("s2", "scale"), Item("k1", "kind")):
        wrapper = teardown(Item("s1", "scale"), nextitem)
        next(wrapper)  # the test's own teardown runs here
        assert events == []
        with pytest.raises(StopIteration):
            wrapper.send(None)
    assert events == ["deleted"]
    sessionfinish(None)
    assert events == ["deleted"]
